// The YAML document with positions: turns a path inside the config into the line and column of
// the node an operator has to fix.
import { isMap, isPair, isScalar, isSeq, LineCounter, type Node, parseDocument } from "yaml";
import { type Substitution, toSourceOffset } from "./env.js";
import type { ConfigProblem } from "./problems.js";

export type PathSegment = string | number;

export class PositionedDocument {
  readonly file: string;
  private readonly doc: ReturnType<typeof parseDocument>;
  private readonly lines: LineCounter;
  private readonly substitutions: readonly Substitution[];
  private readonly sourceLines: LineCounter;

  constructor(file: string, source: string, text: string, substitutions: readonly Substitution[]) {
    this.file = file;
    this.lines = new LineCounter();
    this.doc = parseDocument(text, { lineCounter: this.lines, prettyErrors: false, uniqueKeys: true });
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
    return this.doc.errors.map((e) => this.problemAtOffset(e.pos[0], "", e.message.split("\n")[0]!));
  }

  /**
   * The document as plain data, or the problem that stops it becoming data: an alias to an
   * anchor never set, or aliases that expand past the cap (the "billion laughs").
   */
  toJS(): { ok: true; value: unknown } | { ok: false; problem: ConfigProblem } {
    try {
      return { ok: true, value: this.doc.toJS({ maxAliasCount: 100 }) };
    } catch (err) {
      const message = (err as Error).message.split("\n")[0]!;
      const alias = /alias/i.test(message);
      return {
        ok: false,
        problem: this.problemAtOffset(
          0,
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
    const source = toSourceOffset(this.substitutions, offset);
    const { line, col } = this.sourceLines.linePos(source);
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
      const pair = node.items.find((p) => isPair(p) && isScalar(p.key) && String(p.key.value) === atKey);
      if (pair) return asNode(pair.key);
    }
    return asNode(node);
  }
}

function childOf(node: unknown, segment: PathSegment): { key?: unknown; value?: unknown } | undefined {
  if (isMap(node)) {
    const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(segment));
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
