"""Running the gateway as a user service: a systemd user unit on Linux, a launchd agent on
macOS. `units` renders the files, `manager` installs them and drives the service manager."""

from nodmix.service.manager import ServiceManager, service_manager
from nodmix.service.units import ServiceSpec

__all__ = ["ServiceManager", "ServiceSpec", "service_manager"]
