"""What is trained: a transformer description (TransformerSpec) and the ops it expands into."""

from greentrain.model.spec import TransformerSpec

__all__ = ["TransformerSpec"]
