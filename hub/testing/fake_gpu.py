"""A simulated GPU for FakeOllama: what makes a model server slow in ways a scheduler can change.

A real server runs `slots` generations at once (Ollama's OLLAMA_NUM_PARALLEL), keeps `max_loaded`
models in memory (OLLAMA_MAX_LOADED_MODELS), and reloads weights on every switch, a changed `num_ctx`
included (5-60 s for a 7-32B model). The benchmark drains a backlog against it and counts the loads.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class GPUStats:
    """What the simulated GPU went through (read after the run)."""

    loads: int = 0
    generations: int = 0
    max_concurrent: int = 0
    # Generations asked for at once, before the slots queue them: what the clients sent concurrently.
    max_requested: int = 0
    # (model, num_ctx) in the order they were loaded.
    load_order: list[tuple[str, int | None]] = field(default_factory=list)


class SimulatedGPU:
    """Slots, loaded models and the time each generation and each load takes."""

    def __init__(
        self,
        slots: int = 1,
        max_loaded: int = 1,
        load_seconds: float = 0.0,
        generation_seconds: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.slots = slots
        self.max_loaded = max_loaded
        self.load_seconds = load_seconds
        self.generation_seconds = generation_seconds
        self.stats = GPUStats()
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(slots)
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._active = 0
        self._requested = 0
        self._loaded: OrderedDict[str, int | None] = OrderedDict()

    @contextmanager
    def generation(self, model: str, num_ctx: int | None) -> Iterator[Callable[[], None]]:
        """Hold a slot for one generation: load the model if it is not (evicting the least recently
        used one beyond `max_loaded`), then generate.

        Yields `answered`, to call once the answer is known, before its last bytes go out: a client that
        has read them may send its next request at once, before this handler's thread runs again, and
        counting this request as still asked for until then would see two at once where the clients
        never sent two."""
        with self._lock:
            self._requested += 1
            self.stats.max_requested = max(self.stats.max_requested, self._requested)
        ended = False

        def answered() -> None:
            nonlocal ended
            with self._lock:
                if not ended:
                    ended = True
                    self._requested -= 1

        try:
            with self._generation(model, num_ctx):
                yield answered
        finally:
            answered()

    @contextmanager
    def _generation(self, model: str, num_ctx: int | None) -> Iterator[None]:
        with self._slots:
            with self._lock:
                self._active += 1
                self.stats.max_concurrent = max(self.stats.max_concurrent, self._active)
            try:
                with self._load_lock:
                    if model not in self._loaded or (num_ctx is not None and self._loaded[model] != num_ctx):
                        self._loaded.pop(model, None)
                        while len(self._loaded) >= self.max_loaded:
                            self._loaded.popitem(last=False)
                        self._sleep(self.load_seconds)
                        self.stats.loads += 1
                        self.stats.load_order.append((model, num_ctx))
                        self._loaded[model] = num_ctx
                    self._loaded.move_to_end(model)
                self._sleep(self.generation_seconds)
                with self._lock:
                    self.stats.generations += 1
                yield
            finally:
                with self._lock:
                    self._active -= 1

    def loaded(self) -> list[tuple[str, int | None]]:
        """The models in memory now, least recently used first (what /api/ps lists)."""
        with self._load_lock:
            return list(self._loaded.items())
