"""The node side: the device manager and its parts."""
