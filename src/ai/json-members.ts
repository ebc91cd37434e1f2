// Where each top-level member of a JSON object sits in its text, so that the gateway can change
// one member of a client's request body (its output ceiling, `stream_options`) and send every
// other byte exactly as the client wrote it. Re-serialising the parsed object would not: numbers
// past 2^53 (a `seed`), `1.0`, escapes and key order would all change under the client.
//
// The scanner runs only on text JSON.parse has accepted as an object, so it validates nothing and
// never meets a syntax error; it only has to agree with JSON.parse on where values start and end
// and on what each key is (a key written with escapes, `"mod\u0065l"`, is `model`). A key given
// twice is reported: which copy an upstream reads is its own choice (Python and JavaScript take
// the last, some parsers the first, some refuse), so such a body is refused rather than priced
// by one copy and served by the other.

/**
 * One top-level member: its key as JSON.parse reads it, where its key starts, and its value's
 * span [start, end).
 */
export interface JsonMember {
  readonly key: string;
  readonly keyStart: number;
  readonly start: number;
  readonly end: number;
}

export interface JsonObjectLayout {
  readonly members: readonly JsonMember[];
  /** Where the object's closing `}` is. */
  readonly close: number;
  /** The first key given twice, if any. */
  readonly duplicate: string | undefined;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && isSpace(text.charCodeAt(i))) i++;
  return i;
}

/** The index just past the string that opens at `i` (a `"`). */
function skipString(text: string, i: number): number {
  for (let j = i + 1; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === BACKSLASH) j++;
    else if (c === QUOTE) return j + 1;
  }
  return text.length;
}

/** The index just past the value that starts at `i`. */
function skipValue(text: string, i: number): number {
  const c = text[i];
  if (c === '"') return skipString(text, i);
  if (c === "{" || c === "[") {
    let depth = 0;
    for (let j = i; j < text.length; j++) {
      const d = text[j];
      if (d === '"') j = skipString(text, j) - 1;
      else if (d === "{" || d === "[") depth++;
      else if (d === "}" || d === "]") {
        depth--;
        if (depth === 0) return j + 1;
      }
    }
    return text.length;
  }
  // A number, true, false or null: up to the next delimiter.
  let j = i;
  while (j < text.length) {
    const d = text.charCodeAt(j);
    if (d === 0x2c || d === 0x7d || d === 0x5d || isSpace(d)) break;
    j++;
  }
  return j;
}

/**
 * The top-level members of `text`, which JSON.parse has accepted as an object (anything else is
 * a caller's bug, and throws).
 */
export function objectLayout(text: string): JsonObjectLayout {
  let i = skipSpace(text, 0);
  if (text[i] !== "{") throw new Error("objectLayout: the text is not a JSON object");
  i++;
  const members: JsonMember[] = [];
  const seen = new Set<string>();
  let duplicate: string | undefined;
  for (;;) {
    i = skipSpace(text, i);
    if (text[i] === "}") return { members, close: i, duplicate };
    if (text[i] === ",") {
      i = skipSpace(text, i + 1);
      continue;
    }
    const keyStart = i;
    const keyEnd = skipString(text, i);
    const raw = text.slice(i, keyEnd);
    const key = raw.includes("\\") ? (JSON.parse(raw) as string) : raw.slice(1, -1);
    i = skipSpace(text, keyEnd);
    // The colon.
    i = skipSpace(text, i + 1);
    const end = skipValue(text, i);
    members.push({ key, keyStart, start: i, end });
    if (seen.has(key)) duplicate ??= key;
    seen.add(key);
    i = end;
    if (i >= text.length) throw new Error("objectLayout: the object does not close");
  }
}

/** A member to set (its value as JSON text), or to remove (`json` undefined). */
export interface MemberEdit {
  readonly key: string;
  readonly json: string | undefined;
}

/**
 * `text` with each edit applied: an existing member's value replaced in place, a new member added
 * before the closing `}`, a removed member taken out with one comma beside it. Every byte outside
 * the edited members stays as it was; no edits gives back `text` itself. Keys must be unique in
 * `layout` (objectLayout's `duplicate` unset), and one edit per key.
 */
export function withMembers(text: string, layout: JsonObjectLayout, edits: readonly MemberEdit[]): string {
  if (edits.length === 0) return text;
  const replaced: { start: number; end: number; json: string }[] = [];
  const members = layout.members;
  const removed = new Set<number>();
  for (const edit of edits)
    if (edit.json === undefined) {
      const at = members.findIndex((m) => m.key === edit.key);
      if (at !== -1) removed.add(at);
    }
  let added = "";
  let count = members.length - removed.size;
  for (const edit of edits) {
    const at = members.findIndex((m) => m.key === edit.key);
    if (edit.json === undefined) continue;
    if (at !== -1) {
      replaced.push({ start: members[at]!.start, end: members[at]!.end, json: edit.json });
      continue;
    }
    added += `${count > 0 ? "," : ""}${JSON.stringify(edit.key)}:${edit.json}`;
    count++;
  }
  // A removed member goes with the comma after it (up to the next kept member's key), or, the
  // last kept one, with the comma before it (from the previous kept member's value).
  if (removed.size > 0 && removed.size === members.length) {
    // Nothing kept: the whole inside goes, whitespace before the first key and after the last value aside.
    replaced.push({ start: members[0]!.keyStart, end: members.at(-1)!.end, json: "" });
  } else {
    for (const at of removed) {
      let next = at + 1;
      while (next < members.length && removed.has(next)) next++;
      let previous = at - 1;
      while (previous >= 0 && removed.has(previous)) previous--;
      if (next < members.length)
        replaced.push({ start: members[at]!.keyStart, end: members[next]!.keyStart, json: "" });
      else replaced.push({ start: members[previous]!.end, end: members[at]!.end, json: "" });
    }
  }
  replaced.sort((a, b) => a.start - b.start);
  let out = "";
  let at = 0;
  for (const r of replaced) {
    // Removals of neighbouring members overlap: each byte goes once.
    if (r.start >= at) out += text.slice(at, r.start) + r.json;
    at = Math.max(at, r.end);
  }
  return out + text.slice(at, layout.close) + added + text.slice(layout.close);
}
