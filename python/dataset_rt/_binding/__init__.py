"""The binding to the native core: the only modules that use ctypes."""
