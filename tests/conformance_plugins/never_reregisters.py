"""Broken: registers once and never again, so a kubelet restart leaves the resource at 0 for good."""

from _baseline import Plugin, main


class NeverReregisters(Plugin):
    async def on_kubelet_restart(self) -> None:
        print("kubelet.sock is new; not registering again", flush=True)


if __name__ == "__main__":
    main(NeverReregisters)
