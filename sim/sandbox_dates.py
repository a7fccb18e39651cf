"""The sandbox's stand-ins for `datetime`'s clock readers in agents' modules.

`datetime.datetime.now()`, `utcnow()`, `today()` and `datetime.date.today()` are methods of C
types, which take no replacement attribute, and replacing the classes in the `datetime` module
would change the type of every date in the process. So the sandbox leaves the module alone and
rebinds only the names an agent's own module holds (`sim.sandbox.guard_agent_modules`): a
`datetime` or `date` bound to the class becomes a stand-in class whose clock readers are checked
as `time.time` is, and a `datetime` bound to the module becomes a copy of the module holding
those stand-ins. A stand-in makes no value of its own type: constructing it, or any other class
method (`fromisoformat`, `fromtimestamp`, `combine`, ...), gives the real class's value, and
`isinstance` and `issubclass` answer for the real class, so dates made in agent code are the
dates made anywhere else (they compare, hash and pickle as such).
"""

from __future__ import annotations

import datetime as _datetime
import sys
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

__all__ = ["DATES", "stand_ins"]

DATES = "self.host.clock.now_ms() (datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))"
"""What to use instead of reading the date from the real clock."""

Check = Callable[[FrameType, str, str], None]


class _StandIn(type):
    """The stand-ins' metaclass: instance and subclass checks answer for the real class."""

    def __instancecheck__(cls, value: Any) -> bool:
        return isinstance(value, cls.__agentsim_original__)  # type: ignore[attr-defined]

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, cls.__agentsim_original__)  # type: ignore[attr-defined]


def _stand_in(original: type, readers: tuple[str, ...], check: Check, skip: tuple[str, ...]) -> Any:
    def reader(name: str) -> classmethod[Any, Any, Any]:
        real = getattr(original, name)
        call = f"datetime.{original.__name__}.{name}"

        def read(cls: type, *args: Any, **kwargs: Any) -> Any:
            frame = sys._getframe(1)
            if not frame.f_code.co_filename.startswith(skip):
                check(frame, call, DATES)
            return real(*args, **kwargs)

        read.__name__ = read.__qualname__ = name
        return classmethod(read)

    def construct(cls: type, *args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    namespace: dict[str, Any] = {name: reader(name) for name in readers}
    namespace.update(
        __new__=construct,
        __module__=original.__module__,
        __qualname__=original.__qualname__,
        __doc__=original.__doc__,
        __agentsim_original__=original,
    )
    return _StandIn(original.__name__, (original,), namespace)


def stand_ins(check: Check, skip: tuple[str, ...]) -> dict[int, Any]:
    """id(real object) -> its stand-in, for the `datetime` module and its two classes; `check`
    decides a call from a frame (`sim.sandbox`), `skip` the files whose calls are never looked
    at (the harness's)."""
    date = _stand_in(_datetime.date, ("today",), check, skip)
    moment = _stand_in(_datetime.datetime, ("now", "utcnow", "today"), check, skip)
    module = ModuleType(_datetime.__name__, _datetime.__doc__)
    module.__dict__.update(vars(_datetime))
    module.__dict__.update(date=date, datetime=moment)
    return {id(_datetime): module, id(_datetime.date): date, id(_datetime.datetime): moment}
