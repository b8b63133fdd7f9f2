"""Energy, operational and embodied CO2e, and cost of device time at a site."""

from greentrain.footprint.model import Footprint, footprint
from greentrain.footprint.site import Site

__all__ = ["Footprint", "Site", "footprint"]
