"""The DRA face of the plugin SDK: a DevicePlugin served as a DRA kubelet plugin."""
