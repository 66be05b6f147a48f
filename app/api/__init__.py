"""HTTP routers. They translate between HTTP and CallManager, nothing more."""
