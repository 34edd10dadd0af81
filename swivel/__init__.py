"""Swivel: live reconfiguration of PySpark Structured Streaming jobs on Kubernetes."""

__version__ = "0.1.0"
