"""The node daemon: the device manager fed with manifest pods, plus PodResources and a status API."""
