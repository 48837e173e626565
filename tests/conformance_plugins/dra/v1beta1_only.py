"""Broken: serves and advertises only v1beta1.DRAPlugin, which newer kubelets no longer call."""

from _driver import Gpus, main

if __name__ == "__main__":
    main(Gpus, serve_v1=False)
