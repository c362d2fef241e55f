"""edgesync-feddyn: an EdgeSync extension from outside the package, on `edgesync.api` only — the FedDyn
algorithm (entry point `feddyn`) and WidthNet, a width-scaled CNN (entry point `widenet`)."""
from edgesync_feddyn.feddyn import FEDDYN, FedDynClient, FedDynConfig, FedDynServer
from edgesync_feddyn.widthnet import WidthNet

__all__ = ["FEDDYN", "FedDynClient", "FedDynConfig", "FedDynServer", "WidthNet"]
