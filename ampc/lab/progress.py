"""A progress bar for one epoch with the running loss and images/s: tqdm
where it is installed, plain text otherwise (rewritten in place on a
terminal, a line at each quarter of the epoch in a log).

>>> import io
>>> from ampc.lab.progress import EpochProgress
>>> out = io.StringIO()
>>> bar = EpochProgress(2, "FP32 epoch 1/1", stream=out, use_tqdm=False)
>>> bar.update(loss=2.5, images_per_s=100.0)
>>> bar.update(loss=2.25, images_per_s=120.0)
>>> bar.close()
>>> out.getvalue().splitlines()[-1]
'FP32 epoch 1/1: 2/2 batches, loss 2.250, 120 img/s'
"""
import sys
import time

__all__ = ["EpochProgress", "have_tqdm"]


def have_tqdm():
    """True when tqdm can be imported."""
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


class EpochProgress:
    """``total`` batches labelled ``desc``; ``update()`` after each batch
    with the loss and throughput so far; ``close()`` at the end of the
    epoch.  ``enabled=False`` shows nothing; ``use_tqdm=None`` picks tqdm
    when it is installed.

    >>> import io
    >>> bar = EpochProgress(4, "x", stream=io.StringIO(), enabled=False)
    >>> bar.update(loss=1.0, images_per_s=1.0); bar.close()
    """

    # A terminal line is rewritten at most this often (s).
    _TTY_INTERVAL = 0.2

    def __init__(self, total, desc, stream=None, enabled=True,
                 use_tqdm=None):
        self.total = total
        self.desc = desc
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.done = 0
        self.text = ""
        self._bar = None
        if not enabled:
            return
        if use_tqdm is None:
            use_tqdm = have_tqdm()
        if use_tqdm:
            from tqdm import tqdm
            self._bar = tqdm(total=total, desc=desc, unit="batch",
                             file=self.stream, leave=True,
                             dynamic_ncols=True)
        else:
            isatty = getattr(self.stream, "isatty", None)
            self._tty = bool(isatty and isatty())
            self._last = 0.0
            self._next_quarter = 1

    def update(self, loss, images_per_s):
        """One more batch done; ``loss`` is the epoch's running mean."""
        self.done += 1
        if not self.enabled:
            return
        self.text = f"loss {loss:.3f}, {images_per_s:.0f} img/s"
        if self._bar is not None:
            self._bar.set_postfix_str(self.text, refresh=False)
            self._bar.update(1)
            return
        line = (f"{self.desc}: {self.done}/{self.total} batches, "
                f"{self.text}")
        if self._tty:
            now = time.monotonic()
            if now - self._last >= self._TTY_INTERVAL \
                    or self.done == self.total:
                self._last = now
                self.stream.write("\r" + line)
                self.stream.flush()
        elif self.done * 4 >= self._next_quarter * self.total:
            # Quarters passed at once (an epoch of fewer than 4
            # batches) give one line.
            while self.done * 4 >= self._next_quarter * self.total:
                self._next_quarter += 1
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self):
        """End the bar (also after an interruption: the line so far
        stays)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        elif self._tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
