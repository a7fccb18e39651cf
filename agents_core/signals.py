"""AbortController / AbortSignal, as the web platform has them: cooperative cancellation.

A signal never interrupts anything by itself; code checks `signal.aborted` (or registers a
listener) and stops on its own terms, which is exactly the SDK's cancellation contract."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["AbortController", "AbortSignal"]


class AbortSignal:
    def __init__(self) -> None:
        self.aborted = False
        self.reason: Any = None
        self._listeners: list[Callable[[Any], None]] = []

    def add_listener(self, callback: Callable[[Any], None]) -> None:
        """Call `callback(reason)` on abort (at once if already aborted)."""
        if self.aborted:
            callback(self.reason)
        else:
            self._listeners.append(callback)

    def throw_if_aborted(self) -> None:
        if self.aborted:
            raise AbortError(self.reason)

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted}, reason={self.reason!r})"


class AbortError(Exception):
    """Raised by `throw_if_aborted`; carries the abort reason."""

    def __init__(self, reason: Any) -> None:
        super().__init__(reason if isinstance(reason, str) else "This operation was aborted")
        self.reason = reason


class AbortController:
    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        signal = self.signal
        if signal.aborted:
            return
        signal.aborted = True
        signal.reason = reason
        listeners, signal._listeners = signal._listeners, []
        for callback in listeners:
            callback(reason)
