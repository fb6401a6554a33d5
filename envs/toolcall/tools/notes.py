"""A notes store in SQLite: titled notes with a body and tags. Titles are unique, so "save it as a
note called X" has one checkable outcome."""
from __future__ import annotations

from envs.toolcall.tools import Param, Tool, ToolContext, ToolError


def _tags(tags: list | None) -> str:
    if tags is None:
        return ""
    if not all(isinstance(t, str) and t.strip() and "," not in t for t in tags):
        raise ToolError("tags must be non-empty strings without commas")
    return ",".join(t.strip().lower() for t in tags)


def _note(ctx: ToolContext, note_id: int) -> dict:
    row = ctx.db.execute("SELECT id, title, body, tags FROM notes WHERE id = ?", (note_id,)).fetchone()
    if row is None:
        raise ToolError(f"no note with id {note_id}")
    return {"id": row[0], "title": row[1], "body": row[2], "tags": [t for t in row[3].split(",") if t]}


def create_note(ctx, title: str, body: str, tags: list | None = None):
    if not title.strip():
        raise ToolError("a note needs a title")
    clash = ctx.db.execute("SELECT id FROM notes WHERE title = ?", (title,)).fetchone()
    if clash:
        raise ToolError(f"a note titled {title!r} already exists (id {clash[0]})")
    cur = ctx.db.execute("INSERT INTO notes (title, body, tags) VALUES (?, ?, ?)", (title, body, _tags(tags)))
    return {"note_id": cur.lastrowid}


def search_notes(ctx, query: str = "", tag: str | None = None):
    rows = ctx.db.execute("SELECT id FROM notes WHERE (title LIKE ? OR body LIKE ?) ORDER BY id",
                          (f"%{query}%", f"%{query}%")).fetchall()
    notes = [_note(ctx, r[0]) for r in rows]
    if tag is not None:
        notes = [n for n in notes if tag.lower() in n["tags"]]
    return {"notes": [{"id": n["id"], "title": n["title"], "tags": n["tags"]} for n in notes]}


def get_note(ctx, note_id: int):
    return _note(ctx, note_id)


def update_note(ctx, note_id: int, title: str | None = None, body: str | None = None,
                tags: list | None = None):
    n = _note(ctx, note_id)
    if title is not None and title != n["title"]:
        if ctx.db.execute("SELECT 1 FROM notes WHERE title = ?", (title,)).fetchone():
            raise ToolError(f"a note titled {title!r} already exists")
    ctx.db.execute("UPDATE notes SET title = ?, body = ?, tags = ? WHERE id = ?",
                   (title if title is not None else n["title"], body if body is not None else n["body"],
                    _tags(tags) if tags is not None else ",".join(n["tags"]), note_id))
    return _note(ctx, note_id)


def append_to_note(ctx, note_id: int, text: str):
    n = _note(ctx, note_id)
    ctx.db.execute("UPDATE notes SET body = ? WHERE id = ?", (f"{n['body']}\n{text}", note_id))
    return _note(ctx, note_id)


def delete_note(ctx, note_id: int):
    _note(ctx, note_id)
    ctx.db.execute("DELETE FROM notes WHERE id = ?", (note_id,))
    return {"deleted": note_id}


_ID = Param("integer", "Note id.")
_TAGS = Param("array", "Tags (lower-case words).", required=False, items={"type": "string"})
TOOLS = [
    Tool("create_note", "Save a new note (titles are unique).", {
        "title": Param("string", "Title."), "body": Param("string", "Text."), "tags": _TAGS}, create_note),
    Tool("search_notes", "Notes whose title or body contains the query, optionally with a tag.", {
        "query": Param("string", "Substring; empty matches all.", required=False),
        "tag": Param("string", "Only notes with this tag.", required=False)}, search_notes),
    Tool("get_note", "One note with its full body.", {"note_id": _ID}, get_note),
    Tool("update_note", "Replace a note's title, body and/or tags.", {
        "note_id": _ID, "title": Param("string", "New title.", required=False),
        "body": Param("string", "New body.", required=False), "tags": _TAGS}, update_note),
    Tool("append_to_note", "Add a line at the end of a note's body.", {
        "note_id": _ID, "text": Param("string", "The line to add.")}, append_to_note),
    Tool("delete_note", "Remove a note.", {"note_id": _ID}, delete_note),
]
