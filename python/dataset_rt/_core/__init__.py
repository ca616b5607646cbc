"""The Python API's machinery, on top of the binding."""
