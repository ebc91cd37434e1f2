// The YAML document with positions: turns a path inside the config into the line and column of
// the node an operator has to fix.
import { isMap, isScalar, isSeq, LineCounter, type Node, parseDocument, visit } from "yaml";
import { type Substitution, toSourceOffset } from "./env.js";
import type { ConfigProblem } from "./problems.js";

export type PathSegment = string | number;

/**
 * A YAML library message without the source text it quotes: the composer appends a stray
 * token's text (`Unexpected double-quoted-scalar token in YAML stream: "\"s3cret\""`), and
 * others name a tag, a directive or an escape as written; a bracket out of place makes all
 * that text the tokens after it, and it may be an admin token, an API key or a `${VAR}`
 * substituted in, which never goes to a log or a reload's answer. The position says where to
 * look. What follows the first ": " is always such text; the rest is cut by its pattern.
 */
export function withoutSourceText(message: string): string {
  let line = message.split("\n")[0]!;
  const colon = line.indexOf(": ");
  if (colon !== -1) line = line.slice(0, colon);
  return line
    .replace(/^(Verbatim tags aren't resolved), so .*$/, "$1")
    .replace(/^The .* tag has no suffix$/, "A tag has no suffix")
    .replace(/^(Invalid escape sequence|Unsupported YAML version|Unknown directive) .*$/, "$1");
}

const STRAY_TOKEN = / token in YAML (?:stream|document)$/;

/**
 * One bracket out of place leaves every later token without a place in the document, and the
 * library reports each (a 7-line file gave 74 lines): the first of a run of such errors stands
 * for the run, with how many followed.
 */
function collapseStrayTokens<T extends { message: string }>(sorted: readonly T[]): T[] {
  const out: T[] = [];
  let head: T | undefined;
  let more = 0;
  const close = () => {
    if (head && more > 0)
      out[out.length - 1] = { ...head, message: `${head.message} (and ${more} more tokens after it)` };
    head = undefined;
    more = 0;
  };
  for (const e of sorted) {
    if (STRAY_TOKEN.test(e.message)) {
      if (head) {
        more++;
        continue;
      }
      out.push(e);
      head = e;
      continue;
    }
    close();
    out.push(e);
  }
  close();
  return out;
}

export class PositionedDocument {
  readonly file: string;
  private readonly doc: ReturnType<typeof parseDocument>;
  private readonly lines: LineCounter;
  private readonly substitutions: readonly Substitution[];
  private readonly sourceLines: LineCounter;

  constructor(file: string, source: string, text: string, substitutions: readonly Substitution[]) {
    this.file = file;
    this.lines = new LineCounter();
    // Duplicate keys are found below: the library's own check compares each key with every
    // earlier key of its mapping, which takes seconds for a mapping of 20,000 keys.
    this.doc = parseDocument(text, { lineCounter: this.lines, prettyErrors: false, uniqueKeys: false });
    this.substitutions = substitutions;
    // Positions are reported against the file on disk, which may differ from `text` by the
    // substituted variables; a second counter over the original source gives its lines.
    this.sourceLines = new LineCounter();
    let offset = 0;
    this.sourceLines.addNewLine(0);
    for (;;) {
      const nl = source.indexOf("\n", offset);
      if (nl === -1) break;
      this.sourceLines.addNewLine(nl + 1);
      offset = nl + 1;
    }
  }

  /** YAML syntax errors (and duplicate keys), as problems. */
  syntaxProblems(): ConfigProblem[] {
    const found = this.doc.errors.map((e) => ({ offset: e.pos[0], message: withoutSourceText(e.message) }));
    visit(this.doc, {
      // A list, mapping or alias as a key names nothing in the config (and the YAML library
      // would stringify it with a warning on stderr): a problem at the key, like any other.
      Pair: (_key, pair) => {
        if (pair.key !== null && !isScalar(pair.key))
          found.push({
            offset: (pair.key as Node).range?.[0] ?? 0,
            message: "a key must be a plain word, not a list, a mapping or an alias",
          });
      },
      // A key repeated in one mapping (what `uniqueKeys: true` would report, with its message):
      // one set per mapping, so linear in the document.
      Map: (_key, map) => {
        const seen = new Set<unknown>();
        for (const pair of map.items) {
          if (!isScalar(pair.key)) continue;
          const value = pair.key.value;
          if (seen.has(value))
            found.push({ offset: pair.key.range?.[0] ?? 0, message: "Map keys must be unique" });
          else seen.add(value);
        }
      },
    });
    found.sort((a, b) => a.offset - b.offset);
    return collapseStrayTokens(found).map((e) => this.problemAtOffset(e.offset, "", e.message));
  }

  /** Where the first alias to an anchor never set is (else the first alias, else the start). */
  private firstUnresolvedAlias(): number {
    let first: number | undefined;
    let unresolved: number | undefined;
    visit(this.doc, {
      Alias: (_key, node) => {
        first ??= node.range?.[0];
        if (unresolved === undefined && node.resolve(this.doc) === undefined) {
          unresolved = node.range?.[0];
          return visit.BREAK;
        }
        return undefined;
      },
    });
    return unresolved ?? first ?? 0;
  }

  /**
   * The document as plain data, or the problem that stops it becoming data: an alias to an
   * anchor never set, or aliases that expand past the cap (the "billion laughs").
   */
  toJS(): { ok: true; value: unknown } | { ok: false; problem: ConfigProblem } {
    try {
      return { ok: true, value: this.doc.toJS({ maxAliasCount: 100 }) };
    } catch (err) {
      // The library names the alias as written, which may be a secret a `*` made an alias of
      // (`key: *s3cret`, or a `${VAR}` whose value starts with one): the position says which.
      const message = withoutSourceText((err as Error).message);
      const alias = /alias/i.test(message);
      return {
        ok: false,
        problem: this.problemAtOffset(
          alias ? this.firstUnresolvedAlias() : 0,
          "",
          alias ? `YAML anchors and aliases: ${message}; write the value out instead` : message,
        ),
      };
    }
  }

  problem(path: readonly PathSegment[], message: string, opts: { atKey?: string } = {}): ConfigProblem {
    const node = this.nodeAt(path, opts.atKey);
    return this.problemAtOffset(node?.range?.[0] ?? 0, dotted(path), message);
  }

  private problemAtOffset(offset: number, path: string, message: string): ConfigProblem {
    return this.problemAtSourceOffset(toSourceOffset(this.substitutions, offset), path, message);
  }

  /** A problem at an offset in the file on disk (before substitution). */
  problemAtSourceOffset(offset: number, path: string, message: string): ConfigProblem {
    const { line, col } = this.sourceLines.linePos(offset);
    return { file: this.file, line, column: col, path, message };
  }

  /** The deepest existing node along `path`; with `atKey`, the key node of that entry. */
  private nodeAt(path: readonly PathSegment[], atKey?: string): Node | undefined {
    let node: unknown = this.doc.contents;
    for (const segment of path) {
      const child = childOf(node, segment);
      if (child === undefined) return asNode(node);
      node = child.value ?? child.key;
    }
    if (atKey !== undefined && isMap(node)) {
      const pair = pairsOf(node).get(atKey);
      if (pair) return asNode(pair.key);
    }
    return asNode(node);
  }
}

/**
 * Each mapping's pairs by key, built the first time a problem points into it: a config with
 * thousands of plans and a problem in each must not search the mapping once per problem.
 */
const pairIndexes = new WeakMap<object, Map<string, { key: unknown; value: unknown }>>();

function pairsOf(node: { items: readonly { key: unknown; value: unknown }[] }) {
  let index = pairIndexes.get(node);
  if (!index) {
    index = new Map();
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : undefined;
      // The first of duplicate keys, as a search from the start would find.
      if (key !== undefined && !index.has(key)) index.set(key, pair);
    }
    pairIndexes.set(node, index);
  }
  return index;
}

function childOf(node: unknown, segment: PathSegment): { key?: unknown; value?: unknown } | undefined {
  if (isMap(node)) {
    const pair = pairsOf(node).get(String(segment));
    if (!pair) return undefined;
    return { key: pair.key, value: pair.value ?? undefined };
  }
  if (isSeq(node) && typeof segment === "number") {
    const item = node.items[segment];
    return item === undefined ? undefined : { value: item };
  }
  return undefined;
}

function asNode(value: unknown): Node | undefined {
  return value && typeof value === "object" && "range" in value ? (value as Node) : undefined;
}

export function dotted(path: readonly PathSegment[]): string {
  let out = "";
  for (const s of path) out += typeof s === "number" ? `[${s}]` : out ? `.${s}` : s;
  return out;
}
