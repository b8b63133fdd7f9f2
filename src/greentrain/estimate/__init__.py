"""The analytical estimator: compute (roofline + efficiency), communication, memory, step and run."""
