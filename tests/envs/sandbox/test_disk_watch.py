"""The disk watch's rule, on plain numbers (its Docker use is tested by the terminal red-team tests):
past the limit it kills; over the limit nothing may grow; deleting makes room again."""
from envs.sandbox.disk_watch import DiskWatch

MiB = 1 << 20


def watch_over(sizes: list[int], limit: int = 16 * MiB) -> tuple[DiskWatch, list[int]]:
    """A watch whose layer has each of `sizes` in turn (one per look; a kill's own re-measure takes
    the same size), and the looks at which it killed."""
    now, kills = [0], []

    def size():
        return sizes[now[0]]

    w = DiskWatch(size, lambda: kills.append(now[0]), limit)
    for now[0] in range(len(sizes)):
        w.check()
    return w, kills


def test_it_kills_past_the_limit_only():
    assert watch_over([0, 8 * MiB, 16 * MiB])[1] == []
    assert watch_over([0, 17 * MiB])[1] == [1]


def test_over_the_limit_nothing_may_grow_but_a_log_line():
    w, kills = watch_over([40 * MiB, 40 * MiB, 40 * MiB + 1000, 42 * MiB])
    assert kills == [0, 3] and w.hits == 2


def test_deleting_makes_room_and_the_lowest_size_seen_is_the_new_ceiling():
    assert watch_over([40 * MiB, 30 * MiB, 35 * MiB])[1] == [0, 2]  # 35 > 30 + slack
    assert watch_over([40 * MiB, 4 * MiB, 15 * MiB])[1] == [0]  # back under the limit: room again


def test_a_stopped_watch_never_kills():
    w = DiskWatch(lambda: 100 * MiB, lambda: (_ for _ in ()).throw(AssertionError("killed")), 16 * MiB)
    w.stop()
    assert w.check() is False and w.hits == 0
