"""Broken: calls Register before its own socket serves, but the kubelet dials that socket inside Register."""

from _baseline import Plugin, main


class RegistersBeforeServing(Plugin):
    async def start(self) -> None:
        await self.register()
        await self.serve()


if __name__ == "__main__":
    main(RegistersBeforeServing)
