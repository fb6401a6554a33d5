"""A calendar in SQLite. New or moved events may not overlap existing ones, so scheduling tasks need
a look before the write (list_events / find_free_slot), which is what makes them multi-step."""
from __future__ import annotations

import datetime as dt

from envs.toolcall.tools import Param, Tool, ToolContext, ToolError

_FIELDS = ("id", "title", "date", "start", "end", "location")


def _date(value: str) -> str:
    try:
        return dt.date.fromisoformat(value).isoformat()
    except (TypeError, ValueError):
        raise ToolError(f"bad date {value!r}: use YYYY-MM-DD") from None


def _minutes(value: str) -> int:
    try:
        t = dt.time.fromisoformat(value)
    except (TypeError, ValueError):
        raise ToolError(f"bad time {value!r}: use HH:MM (24 h)") from None
    return t.hour * 60 + t.minute


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _event(ctx: ToolContext, event_id: int) -> dict:
    row = ctx.db.execute('SELECT id, title, date, start, "end", location FROM events WHERE id = ?',
                         (event_id,)).fetchone()
    if row is None:
        raise ToolError(f"no event with id {event_id}")
    return dict(zip(_FIELDS, row))


def _day(ctx: ToolContext, date: str) -> list[dict]:
    rows = ctx.db.execute('SELECT id, title, date, start, "end", location FROM events WHERE date = ? '
                          "ORDER BY start, id", (date,)).fetchall()
    return [dict(zip(_FIELDS, r)) for r in rows]


def _check_slot(ctx: ToolContext, date: str, start: str, end: str, ignore_id: int | None = None) -> None:
    s, e = _minutes(start), _minutes(end)
    if e <= s:
        raise ToolError(f"the event must end after it starts ({start}-{end})")
    for ev in _day(ctx, date):
        if ev["id"] != ignore_id and _minutes(ev["start"]) < e and s < _minutes(ev["end"]):
            raise ToolError(f"{date} {start}-{end} overlaps event {ev['id']} "
                            f"({ev['title']}, {ev['start']}-{ev['end']})")


def list_events(ctx, date: str):
    date = _date(date)
    return {"date": date, "events": _day(ctx, date)}


def create_event(ctx, title: str, date: str, start: str, end: str, location: str = ""):
    date = _date(date)
    start, end = _hhmm(_minutes(start)), _hhmm(_minutes(end))
    _check_slot(ctx, date, start, end)
    cur = ctx.db.execute('INSERT INTO events (title, date, start, "end", location) VALUES (?, ?, ?, ?, ?)',
                         (title, date, start, end, location))
    return {"event_id": cur.lastrowid}


def update_event(ctx, event_id: int, title: str | None = None, date: str | None = None,
                 start: str | None = None, end: str | None = None, location: str | None = None):
    ev = _event(ctx, event_id)
    new = {"title": title if title is not None else ev["title"],
           "date": _date(date) if date is not None else ev["date"],
           "start": _hhmm(_minutes(start)) if start is not None else ev["start"],
           "end": _hhmm(_minutes(end)) if end is not None else ev["end"],
           "location": location if location is not None else ev["location"]}
    if (new["date"], new["start"], new["end"]) != (ev["date"], ev["start"], ev["end"]):  # a rename may stay put
        _check_slot(ctx, new["date"], new["start"], new["end"], ignore_id=event_id)
    ctx.db.execute('UPDATE events SET title = ?, date = ?, start = ?, "end" = ?, location = ? WHERE id = ?',
                   (new["title"], new["date"], new["start"], new["end"], new["location"], event_id))
    return _event(ctx, event_id)


def delete_event(ctx, event_id: int):
    _event(ctx, event_id)
    ctx.db.execute("DELETE FROM events WHERE id = ?", (event_id,))
    return {"deleted": event_id}


def find_free_slot(ctx, date: str, duration_minutes: int, earliest: str = "09:00", latest: str = "18:00"):
    date = _date(date)
    if duration_minutes <= 0:
        raise ToolError("duration_minutes must be positive")
    t, stop = _minutes(earliest), _minutes(latest)
    for ev in _day(ctx, date):
        s, e = _minutes(ev["start"]), _minutes(ev["end"])
        if s - t >= duration_minutes:
            break
        t = max(t, e)
    if t + duration_minutes > stop:
        raise ToolError(f"no free {duration_minutes}-minute slot on {date} between {earliest} and {latest}")
    return {"date": date, "start": _hhmm(t), "end": _hhmm(t + duration_minutes)}


_DATE = Param("string", "Date, YYYY-MM-DD.")
_ID = Param("integer", "Event id.")
TOOLS = [
    Tool("list_events", "The events of one day, in time order.", {"date": _DATE}, list_events),
    Tool("create_event", "Add an event; it may not overlap another event that day.", {
        "title": Param("string", "Title."), "date": _DATE,
        "start": Param("string", "Start time, HH:MM (24 h)."), "end": Param("string", "End time, HH:MM."),
        "location": Param("string", "Where.", required=False)}, create_event),
    Tool("update_event", "Change an event's title, date, times or location (no overlaps).", {
        "event_id": _ID, "title": Param("string", "New title.", required=False),
        "date": Param("string", "New date, YYYY-MM-DD.", required=False),
        "start": Param("string", "New start, HH:MM.", required=False),
        "end": Param("string", "New end, HH:MM.", required=False),
        "location": Param("string", "New location.", required=False)}, update_event),
    Tool("delete_event", "Remove an event.", {"event_id": _ID}, delete_event),
    Tool("find_free_slot", "The earliest free slot of a given length on a day.", {
        "date": _DATE, "duration_minutes": Param("integer", "Length of the slot."),
        "earliest": Param("string", "Not before, HH:MM (default 09:00).", required=False),
        "latest": Param("string", "Must end by, HH:MM (default 18:00).", required=False)}, find_free_slot),
]
