"""The SDK releases the runtime models, each a choice of components (docs/architecture.md).

`registry.py` names them and finds one by name; each release's module (`v0_21.py`, ...) builds an
agent's components as that release has them. An agent runs the release its host names
(`Host.release`): the platform decides which code is deployed, so a deploy can bring another.
"""
