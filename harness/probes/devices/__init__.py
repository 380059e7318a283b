"""Device probes sampled through an idle pause: one module per source, one small interface.

``base.DeviceProbe`` is the interface (``power_state`` first, then ``read``); ``nvml``,
``drm`` (AMD/Intel sysfs), ``fdinfo`` (DRM fdinfo of the server's PID), ``vulkan``
(VK_EXT_memory_budget through ``vulkaninfo``), ``apple`` (ioreg/vm_stat) and ``process``
(the server process's host memory: the CPU backend's and a software Vulkan device's
"device memory") are the sources; ``registry`` finds which exist here and says why the
others do not; ``sampler`` reads them on a thread at a bounded rate while a pause is
waited out, and stops a guard interval before the request (docs/probes.md).
"""
