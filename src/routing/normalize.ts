// Request-target normalisation: the path that is classified must be the path that is served.
//
// Every spelling an upstream might resolve to the same resource must resolve to the same route
// here, or be refused. So: percent-encoded unreserved characters are decoded, dot segments are
// resolved, repeated slashes merged, `;params` dropped, and anything an upstream could read as
// a different path than we do (an encoded slash or backslash, NUL, controls, invalid or
// overlong UTF-8, a raw backslash) is a 400 rather than a guess.

export type NormalizedTarget =
  | { ok: true; path: string; query: string; matchPath: string }
  | { ok: false; reason: string };

const FAST_PATH = /^(?:\/[A-Za-z0-9\-_~!$&'()*+,=:@.]*)+$/;
const DOT_SEGMENT = /\/\.\.?(?:\/|$)/;
const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,=:@%;]*$/;
const ABSOLUTE_FORM = /^https?:\/\/[^/?#]*/i;
const HEX = /^[0-9A-Fa-f]{2}$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

function isUnreserved(byte: number): boolean {
  return (
    (byte >= 0x41 && byte <= 0x5a) || // A-Z
    (byte >= 0x61 && byte <= 0x7a) || // a-z
    (byte >= 0x30 && byte <= 0x39) || // 0-9
    byte === 0x2d || // -
    byte === 0x2e || // .
    byte === 0x5f || // _
    byte === 0x7e // ~
  );
}

export function normalizeTarget(target: string): NormalizedTarget {
  let rest = target;
  if (rest[0] !== "/") {
    const absolute = ABSOLUTE_FORM.exec(rest);
    if (!absolute) return { ok: false, reason: "the request target is not a path" };
    rest = rest.slice(absolute[0].length) || "/";
    if (rest[0] === "?") rest = `/${rest}`;
  }
  const q = rest.indexOf("?");
  const rawPath = q === -1 ? rest : rest.slice(0, q);
  const query = q === -1 ? "" : rest.slice(q);
  if (query.includes("#")) return { ok: false, reason: "a request target cannot carry a fragment" };

  if (FAST_PATH.test(rawPath) && !rawPath.includes("//") && !DOT_SEGMENT.test(rawPath)) {
    return { ok: true, path: rawPath, query, matchPath: lowerForMatch(rawPath) };
  }
  const path = normalizeSlowPath(rawPath);
  if (typeof path !== "string") return path;
  return { ok: true, path, query, matchPath: lowerForMatch(path) };
}

function normalizeSlowPath(rawPath: string): string | { ok: false; reason: string } {
  const rawSegments = rawPath.split("/");
  const out: string[] = [];
  let trailingSlash = false;
  for (let i = 1; i < rawSegments.length; i++) {
    const isLast = i === rawSegments.length - 1;
    let segment = rawSegments[i]!;
    if (!PCHAR.test(segment)) {
      return {
        ok: false,
        reason: segment.includes("\\") ? "a backslash in the path" : "a character not allowed in a path",
      };
    }
    // Matrix parameters: Tomcat, Jetty and others route `/login;x=1` as `/login`, so we must too.
    const semicolon = segment.indexOf(";");
    if (semicolon !== -1) segment = segment.slice(0, semicolon);
    if (segment.includes("%")) {
      const decoded = decodeSegment(segment);
      if (typeof decoded !== "string") return decoded;
      segment = decoded;
    }
    if (segment === "" || segment === ".") {
      if (isLast) trailingSlash = true;
      continue;
    }
    if (segment === "..") {
      out.pop();
      if (isLast) trailingSlash = true;
      continue;
    }
    if (isLast) trailingSlash = false;
    out.push(segment);
  }
  if (out.length === 0) return "/";
  return `/${out.join("/")}${trailingSlash ? "/" : ""}`;
}

function decodeSegment(segment: string): string | { ok: false; reason: string } {
  let out = "";
  let hasHighBytes = false;
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]!;
    if (c !== "%") {
      out += c;
      continue;
    }
    const hex = segment.slice(i + 1, i + 3);
    if (!HEX.test(hex)) return { ok: false, reason: "an invalid percent-encoding in the path" };
    const byte = Number.parseInt(hex, 16);
    i += 2;
    if (byte === 0x2f || byte === 0x5c)
      return { ok: false, reason: "an encoded slash or backslash in the path" };
    if (byte < 0x20 || byte === 0x7f)
      return { ok: false, reason: "an encoded control character in the path" };
    if (isUnreserved(byte)) {
      out += String.fromCharCode(byte);
      continue;
    }
    if (byte >= 0x80) hasHighBytes = true;
    out += `%${hex.toUpperCase()}`;
  }
  // Overlong or invalid UTF-8 (`%C0%AF` for "/") is how path filters get bypassed: refuse it.
  if (hasHighBytes && !isValidUtf8(segment)) return { ok: false, reason: "invalid UTF-8 in the path" };
  return out;
}

function isValidUtf8(segment: string): boolean {
  const bytes: number[] = [];
  for (let i = 0; i < segment.length; i++) {
    if (segment[i] === "%") {
      bytes.push(Number.parseInt(segment.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(segment.charCodeAt(i));
    }
  }
  try {
    utf8.decode(Uint8Array.from(bytes));
    return true;
  } catch {
    return false;
  }
}

/** Matching is case-insensitive; a trailing slash does not make another route. */
function lowerForMatch(path: string): string {
  const lower = path.toLowerCase();
  return lower.length > 1 && lower.endsWith("/") ? lower.slice(0, -1) : lower;
}
