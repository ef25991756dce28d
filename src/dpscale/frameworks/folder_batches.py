"""What every framework's folder pipeline shares, without a framework: a rank's batches
epoch after epoch, the images delivered, and one line where an epoch gives no full batch.
Each framework's module (torch_folder, tf_folder, mxnet_folder) says how an epoch starts and
what a delivered batch carries of the files it skipped."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class EpochBatches:
    """``next()``: the epoch's next full batch, else a new epoch's first; RuntimeError with
    ``no_full_batch()``'s line where a fresh epoch gives none."""

    def __init__(self) -> None:
        self.epoch, self.images_read = -1, 0
        self._batches: Iterator | None = None

    def next_epoch(self) -> Iterator:
        """The new epoch's batches (self.epoch already counts it)."""
        raise NotImplementedError

    def taken(self, found: Any) -> tuple[Any, Any, int]:
        """(images, labels, how many) of a delivered batch, noting the files it skipped."""
        raise NotImplementedError

    def no_full_batch(self) -> str:
        raise NotImplementedError

    def next(self) -> tuple[Any, Any]:
        for _ in range(2):  # the epoch going on, else a new one
            if self._batches is None:
                self.epoch += 1
                self._batches = self.next_epoch()
            found = next(self._batches, None)
            if found is not None:
                images, labels, count = self.taken(found)
                self.images_read += count
                return images, labels
            self._batches = None
        raise RuntimeError(self.no_full_batch())
