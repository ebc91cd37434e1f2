// An incremental JSON scanner that reads the numbers at a few watched paths and nothing else.
//
// It sits in the response path, so it holds no part of the body: a state machine over bytes,
// fed each chunk as it passes to the client. Its memory is fixed by the watched paths: one stack
// entry per level of the deepest path, a key buffer as long as the longest watched name, and a
// handful of numbers for the number being read (its text is never kept, so a number of any length
// costs nothing). It never throws, and its time is one pass over the bytes (the byte that ends a
// number is looked at twice).
//
// Only the objects a watched path goes through are read as JSON (names, colons, commas, and the
// values at watched names). Every other value, arrays and objects no path enters included, is
// skipped without being checked: only its strings (escapes honoured) and brackets are followed,
// to find the `,` or `}` after it, so 1e6 nested `[` cost one counter. A syntax error where the
// scanner does read stops the document: what was recorded before it stays, nothing after counts.
//
// A number counts when the object it is in goes on (`,`) or closes (`}`) after it: a number cut
// by the end of the stream, or followed by garbage, is never recorded. Within a document, as in
// JSON.parse, the last member of a name wins.

/** The most units one response can report; a larger whole number is capped here (see meter.ts). */
export const MAX_REPORTED_UNITS = 1_000_000;

/** A level of the watched paths: the names that lead on, and the path that ends here (or -1). */
export interface WatchNode {
  readonly names: readonly Uint8Array[];
  readonly children: readonly WatchNode[];
  readonly pathId: number;
}

export interface WatchTree {
  readonly root: WatchNode;
  /** Distinct watched paths; the scanner records into an array of this length. */
  readonly pathCount: number;
  /** The id of each path given to compileWatch (equal paths share one). */
  readonly ids: readonly number[];
  /** The longest name (in bytes) and the most levels of any path. */
  readonly longestName: number;
  readonly depth: number;
}

interface MutableNode {
  names: Uint8Array[];
  children: MutableNode[];
  pathId: number;
}

/** Names are ASCII (fields.ts allows [A-Za-z0-9_-]), so a name's bytes are its char codes. */
export function compileWatch(paths: readonly (readonly string[])[]): WatchTree {
  const root: MutableNode = { names: [], children: [], pathId: -1 };
  const ids: number[] = [];
  let pathCount = 0;
  let longestName = 0;
  let depth = 0;
  for (const path of paths) {
    let node = root;
    for (const name of path) {
      const bytes = Uint8Array.from(name, (ch) => ch.charCodeAt(0) & 0xff);
      longestName = Math.max(longestName, bytes.length);
      const at = node.names.findIndex((n) => sameBytes(n, bytes));
      if (at !== -1) {
        node = node.children[at]!;
      } else {
        const child: MutableNode = { names: [], children: [], pathId: -1 };
        node.names.push(bytes);
        node.children.push(child);
        node = child;
      }
    }
    if (node.pathId === -1 && node !== root) node.pathId = pathCount++;
    ids.push(node.pathId);
    depth = Math.max(depth, path.length);
  }
  return { root, pathCount, ids, longestName, depth };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// States. The number states follow RFC 8259 §6 exactly: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
const TOP = 0; // before the top-level value
const OBJ_START = 1; // after `{`: a name or `}`
const NAME_NEXT = 2; // after `,`: a name
const NAME = 3; // inside a member name
const NAME_ESC = 4; // after `\` in a name
const NAME_HEX = 5; // inside `\uXXXX` in a name
const COLON = 6;
const VALUE = 7; // after `:`
const AFTER = 8; // after a member's value: `,` or `}`
const STRING = 9; // inside a string value (watched level or skipped)
const STRING_ESC = 10;
const LITERAL = 11; // inside true, false or null
const SKIP = 12; // inside a value no path enters, up to the `,` or `}` after it
const N_MINUS = 13;
const N_ZERO = 14;
const N_INT = 15;
const N_DOT = 16;
const N_FRAC = 17;
const N_E = 18;
const N_E_SIGN = 19;
const N_EXP = 20;
const DONE = 21; // the top-level object closed (or the top level is not an object): the rest is ignored
const DEAD = 22; // a syntax error at a level read: the rest of the document is ignored

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const LBRACE = 0x7b;
const RBRACE = 0x7d;
const LBRACKET = 0x5b;
const RBRACKET = 0x5d;
const COMMA = 0x2c;
const COLON_CHAR = 0x3a;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

const LITERALS = [
  Uint8Array.from("true", (c) => c.charCodeAt(0)),
  Uint8Array.from("false", (c) => c.charCodeAt(0)),
  Uint8Array.from("null", (c) => c.charCodeAt(0)),
];

/** Significant digits kept: below 2^53, so their value is exact. A countable value needs 7. */
const KEPT_DIGITS = 15;
/** Exponents are counted up to here: far beyond any countable value, and still exact. */
const EXP_CAP = 1e14;

// What the skip loop stops at. Everything else (the bulk of a body) is one table lookup.
const K_QUOTE = 1;
const K_OPEN = 2;
const K_CLOSE = 3;
const K_END = 4; // `,`: ends the skipped value at its own level
const SKIP_CLASS = new Uint8Array(256);
SKIP_CLASS[QUOTE] = K_QUOTE;
SKIP_CLASS[LBRACE] = K_OPEN;
SKIP_CLASS[LBRACKET] = K_OPEN;
SKIP_CLASS[RBRACE] = K_CLOSE;
SKIP_CLASS[RBRACKET] = K_CLOSE;
SKIP_CLASS[COMMA] = K_END;

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function hexValue(c: number): number {
  if (c >= ZERO && c <= NINE) return c - ZERO;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/**
 * Reads one JSON document (call reset() for the next) and writes each counted number into
 * `values[pathId]`, replacing what was there. Values are whole numbers in [0, cap].
 */
export class JsonScanner {
  private state = TOP;
  /** Objects open at read levels: stack[0] is the top-level object's node. */
  private readonly stack: WatchNode[];
  private depth = 0;
  /** The node of the value being read, null when no path goes there. */
  private node: WatchNode | null = null;
  private readonly nameBuf: Uint8Array;
  private nameLength = 0;
  /** False once the name cannot be a watched one (too long, or an escape that is no name char). */
  private nameOk = true;
  private hex = 0;
  private hexLeft = 0;
  /** Where a string returns to: AFTER (a member's value) or SKIP (inside a skipped value). */
  private stringThen = AFTER;
  private skipDepth = 0;
  private literal: Uint8Array = LITERALS[0]!;
  private literalAt = 0;
  // The number being read, as value = digits × 10^(exponent − fractionDigits).
  private negative = false;
  /** Digits from the first non-zero one on, the zeros at their end, and the first KEPT_DIGITS as a number. */
  private significant = 0;
  private trailingZeros = 0;
  private kept = 0;
  private fractionDigits = 0;
  private exponent = 0;
  private exponentNegative = false;
  /** A counted number waits here for the `,` or `}` that completes it. */
  private pendingId = -1;
  private pendingValue = 0;
  private readonly maxDigits: number;

  constructor(
    private readonly tree: WatchTree,
    private readonly values: Float64Array,
    /** The largest value recorded; a larger whole number is recorded as this. */
    private readonly cap: number = MAX_REPORTED_UNITS,
  ) {
    this.maxDigits = String(cap).length;
    this.stack = new Array<WatchNode>(Math.max(1, tree.depth)).fill(tree.root);
    this.nameBuf = new Uint8Array(Math.max(1, tree.longestName));
  }

  /** Starts a new document (the next SSE event); values recorded so far stay. */
  reset(): void {
    this.state = TOP;
    this.depth = 0;
    this.pendingId = -1;
  }

  write(buf: Uint8Array, start: number, end: number): void {
    let state = this.state;
    let i = start;
    while (i < end) {
      switch (state) {
        case SKIP: {
          // The hot loop for most of a completion's bytes: only quotes, brackets and, at the
          // skipped value's own level, the `,` or `}` that ends it matter.
          let depth = this.skipDepth;
          for (; i < end; i++) {
            const c = buf[i]!;
            const kind = SKIP_CLASS[c]!;
            if (kind === 0) continue;
            if (kind === K_QUOTE) {
              // The string is skipped right here (most skipped bytes are in strings); one that
              // goes on past this chunk is finished by STRING.
              let j = i + 1;
              for (; j < end; j++) {
                const d = buf[j]!;
                if (d === QUOTE) break;
                if (d === BACKSLASH) j++;
              }
              if (j < end) {
                i = j;
                continue;
              }
              this.stringThen = SKIP;
              // Ending on a backslash (j === end + 1) leaves its escaped byte for the next chunk.
              state = j === end ? STRING : STRING_ESC;
              i = end;
              break;
            }
            if (kind === K_OPEN) depth++;
            else if (depth > 0) {
              if (kind === K_CLOSE) depth--;
            } else {
              // The member's value ended: AFTER reads this `,` or `}` (a `]` is an error there).
              state = AFTER;
              break;
            }
          }
          this.skipDepth = depth;
          break;
        }
        case NAME: {
          let length = this.nameLength;
          let ok = this.nameOk;
          const cap = this.nameBuf.length;
          for (; i < end; i++) {
            const c = buf[i]!;
            if (c === QUOTE || c === BACKSLASH) {
              state = c === QUOTE ? COLON : NAME_ESC;
              i++;
              break;
            }
            // A name longer than every watched one is not kept, only noted as matching none.
            if (!ok) continue;
            if (length === cap) ok = false;
            else this.nameBuf[length++] = c;
          }
          this.nameLength = length;
          this.nameOk = ok;
          if (state === COLON) this.node = ok ? this.child() : null;
          break;
        }
        case STRING: {
          for (; i < end; i++) {
            const c = buf[i]!;
            if (c === QUOTE) {
              state = this.stringThen;
              i++;
              break;
            }
            if (c === BACKSLASH) {
              state = STRING_ESC;
              i++;
              break;
            }
          }
          break;
        }
        case STRING_ESC:
          // Any escape is one byte after the backslash (\uXXXX's digits are plain bytes).
          state = STRING;
          i++;
          break;
        case DONE:
        case DEAD:
          i = end;
          break;
        default:
          state = this.step(state, buf[i]!);
          // A number ends at the byte after it, which is read again in the state it leads to.
          if (state >= 0) i++;
          else state = -state - 1;
      }
    }
    this.state = state;
  }

  /**
   * One byte in one of the colder states. Returns the next state, or -(state + 1) when the byte
   * must be read again in that state (the byte that ends a number).
   */
  private step(state: number, c: number): number {
    switch (state) {
      case TOP:
        if (isSpace(c)) return TOP;
        // A top-level array, string or number has no member a path could name.
        if (c !== LBRACE || this.tree.root.children.length === 0) return DONE;
        this.stack[0] = this.tree.root;
        this.depth = 1;
        return OBJ_START;
      case OBJ_START:
        if (isSpace(c)) return OBJ_START;
        if (c === QUOTE) return this.startName();
        if (c === RBRACE) return this.closeObject();
        return DEAD;
      case NAME_NEXT:
        if (isSpace(c)) return NAME_NEXT;
        if (c === QUOTE) return this.startName();
        return DEAD;
      case NAME_ESC:
        if (c === 0x75 /* u */) {
          this.hex = 0;
          this.hexLeft = 4;
          return NAME_HEX;
        }
        // \" \\ \/ \b \f \n \r \t decode to characters no watched name has.
        if (c === QUOTE || c === BACKSLASH || c === 0x2f || c === 0x62 || c === 0x66) this.nameOk = false;
        else if (c === 0x6e || c === 0x72 || c === 0x74) this.nameOk = false;
        else return DEAD;
        return NAME;
      case NAME_HEX: {
        const v = hexValue(c);
        if (v < 0) return DEAD;
        this.hex = this.hex * 16 + v;
        if (--this.hexLeft > 0) return NAME_HEX;
        // `\u0075sage` is `usage`: a name is compared after its escapes are decoded.
        if (this.hex < 0x80) this.pushNameByte(this.hex);
        else this.nameOk = false;
        return NAME;
      }
      case COLON:
        if (c !== COLON_CHAR) return isSpace(c) ? COLON : DEAD;
        if (this.node !== null) return VALUE;
        // No path goes there: the value, whatever it is, is skipped up to its member's end.
        this.skipDepth = 0;
        return SKIP;
      case VALUE:
        return this.startValue(c);
      case AFTER:
        if (isSpace(c)) return AFTER;
        if (c === COMMA) {
          this.commit();
          return NAME_NEXT;
        }
        if (c === RBRACE) {
          this.commit();
          return this.closeObject();
        }
        this.pendingId = -1;
        return DEAD;
      case LITERAL:
        if (c !== this.literal[this.literalAt]) return DEAD;
        return ++this.literalAt === this.literal.length ? AFTER : LITERAL;
      case N_MINUS:
        if (c === ZERO) return this.digit(0, N_ZERO);
        if (c > ZERO && c <= NINE) return this.digit(c - ZERO, N_INT);
        return DEAD;
      case N_ZERO:
        if (c === DOT) return N_DOT;
        if (c === 0x65 || c === 0x45) return N_E;
        if (c >= ZERO && c <= NINE) return DEAD; // a leading zero
        return this.endNumber();
      case N_INT:
        if (c >= ZERO && c <= NINE) return this.digit(c - ZERO, N_INT);
        if (c === DOT) return N_DOT;
        if (c === 0x65 || c === 0x45) return N_E;
        return this.endNumber();
      case N_DOT:
        if (c < ZERO || c > NINE) return DEAD;
        this.fractionDigits++;
        return this.digit(c - ZERO, N_FRAC);
      case N_FRAC:
        if (c >= ZERO && c <= NINE) {
          this.fractionDigits++;
          return this.digit(c - ZERO, N_FRAC);
        }
        if (c === 0x65 || c === 0x45) return N_E;
        return this.endNumber();
      case N_E:
        if (c === PLUS || c === MINUS) {
          this.exponentNegative = c === MINUS;
          return N_E_SIGN;
        }
        if (c >= ZERO && c <= NINE) return this.exponentDigit(c - ZERO);
        return DEAD;
      case N_E_SIGN:
        if (c >= ZERO && c <= NINE) return this.exponentDigit(c - ZERO);
        return DEAD;
      case N_EXP:
        if (c >= ZERO && c <= NINE) return this.exponentDigit(c - ZERO);
        return this.endNumber();
      default:
        return DEAD;
    }
  }

  private startName(): number {
    this.nameLength = 0;
    this.nameOk = true;
    return NAME;
  }

  private pushNameByte(c: number): void {
    if (!this.nameOk) return;
    // A name longer than every watched one is not kept, only noted as matching none.
    if (this.nameLength === this.nameBuf.length) this.nameOk = false;
    else this.nameBuf[this.nameLength++] = c;
  }

  /** The watched node the name just read leads to, or null. */
  private child(): WatchNode | null {
    const parent = this.stack[this.depth - 1]!;
    const names = parent.names;
    for (let k = 0; k < names.length; k++) {
      const name = names[k]!;
      if (name.length !== this.nameLength) continue;
      let same = true;
      for (let j = 0; j < name.length; j++) {
        if (name[j] !== this.nameBuf[j]) {
          same = false;
          break;
        }
      }
      if (same) return parent.children[k]!;
    }
    return null;
  }

  private startValue(c: number): number {
    if (isSpace(c)) return VALUE;
    const node = this.node;
    if (c === LBRACE) {
      if (node !== null && node.children.length > 0) {
        this.stack[this.depth++] = node;
        return OBJ_START;
      }
      this.skipDepth = 1;
      return SKIP;
    }
    if (c === LBRACKET) {
      // Arrays are not entered: a path names object members only.
      this.skipDepth = 1;
      return SKIP;
    }
    if (c === QUOTE) {
      this.stringThen = AFTER;
      return STRING;
    }
    if (c === MINUS || (c >= ZERO && c <= NINE)) {
      this.negative = c === MINUS;
      this.significant = 0;
      this.trailingZeros = 0;
      this.kept = 0;
      this.fractionDigits = 0;
      this.exponent = 0;
      this.exponentNegative = false;
      if (c === MINUS) return N_MINUS;
      return c === ZERO ? N_ZERO : this.digit(c - ZERO, N_INT);
    }
    const literal = c === 0x74 ? 0 : c === 0x66 ? 1 : c === 0x6e ? 2 : -1;
    if (literal === -1) return DEAD;
    this.literal = LITERALS[literal]!;
    this.literalAt = 1;
    return LITERAL;
  }

  private closeObject(): number {
    return --this.depth === 0 ? DONE : AFTER;
  }

  private digit(d: number, next: number): number {
    if (d !== 0) {
      this.significant++;
      this.trailingZeros = 0;
      if (this.significant <= KEPT_DIGITS) this.kept = this.kept * 10 + d;
    } else if (this.significant > 0) {
      // Zeros before the first non-zero digit are not significant (0.05 has one digit, 5).
      this.significant++;
      this.trailingZeros++;
      if (this.significant <= KEPT_DIGITS) this.kept *= 10;
    }
    return next;
  }

  private exponentDigit(d: number): number {
    if (this.exponent < EXP_CAP) this.exponent = this.exponent * 10 + d;
    return N_EXP;
  }

  /** The number just ended: keep its value if it is countable at a watched path, then read the byte again. */
  private endNumber(): number {
    const id = this.node === null ? -1 : this.node.pathId;
    if (id !== -1) {
      const value = this.countable();
      if (value !== undefined) {
        this.pendingId = id;
        this.pendingValue = value;
      }
    }
    return -(AFTER + 1);
  }

  /**
   * The number as a count, or undefined. A count is a whole number >= 0 by its value, not its
   * spelling: 1.0, 1e3 and 1.50e1 count (a serializer that writes floats writes 1.0), 1.5, 1e-3
   * and -5 do not, -0 is 0. A whole number above MAX_REPORTED_UNITS is capped (1e12 is a huge
   * count, still a count). Decided from the digits, not from a float: 1.0000000000000000001 is
   * not whole although it parses as 1, and 1e400 is whole although it parses as Infinity.
   */
  private countable(): number | undefined {
    const digits = this.significant - this.trailingZeros; // of the value without its trailing zeros
    if (digits === 0) return 0;
    if (this.negative) return undefined;
    const exponent = this.exponentNegative ? -this.exponent : this.exponent;
    const scale = exponent - this.fractionDigits + this.trailingZeros; // value = those digits × 10^scale
    if (scale < 0) return undefined;
    if (digits + scale > this.maxDigits) return this.cap;
    // digits <= maxDigits < KEPT_DIGITS here, so they are all in `kept`, followed by zeros.
    const keptCount = Math.min(this.significant, KEPT_DIGITS);
    const mantissa = this.kept / 10 ** (keptCount - digits);
    return Math.min(mantissa * 10 ** scale, this.cap);
  }

  private commit(): void {
    if (this.pendingId !== -1) this.values[this.pendingId] = this.pendingValue;
    this.pendingId = -1;
  }
}
