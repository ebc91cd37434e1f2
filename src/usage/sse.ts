// The `data:` of a `text/event-stream`, event by event, streamed into a JSON scanner.
//
// Parsing follows the HTML standard's event stream interpretation: lines end at LF, CR LF or a
// lone CR (a CR LF split between two chunks is one line end); a blank line ends an event; a line
// starting with `:` is a comment; the field name runs to the first `:`; a line with no colon is a
// field with an empty value; several `data` lines of one event are joined by LF; a leading UTF-8
// BOM is skipped. The one space the standard drops after the colon is left in: it is whitespace
// to the JSON scanner. Only `data` is read (`event`, `id`, `retry` and unknown fields change
// nothing about usage).
//
// An event's data is never assembled: each data line's bytes go to the scanner as they arrive,
// the joining LF between lines included, and the scanner is reset when the event ends. So an
// event of 100 MB costs what an event of 100 bytes does. `data: [DONE]` needs no special case:
// it is not an object, so the scanner ignores it. The last event of a stream that ends without
// its blank line is read too: the numbers it completed were reported.
import type { JsonScanner } from "./json-scan.js";

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const DATA = [0x64, 0x61, 0x74, 0x61]; // "data"
const JOIN = new Uint8Array([LF]);

const BOM_1 = 0; // the stream's first byte: maybe EF
const BOM_2 = 1; // after EF: maybe BB
const BOM_3 = 2; // after EF BB: maybe BF
const LINE_START = 3;
const FIELD = 4; // inside a field name that is so far a prefix of "data"
const AFTER_DATA = 5; // after the name "data": `:` or the line's end
const VALUE = 6; // a data line's value, passed to the scanner
const IGNORE = 7; // the rest of a line that is not data

export class SseScanner {
  private state = BOM_1;
  private fieldAt = 0;
  /** The line ended with CR: an LF first thing in the next chunk belongs to it. */
  private afterCr = false;
  /** Data lines of the current event so far (the second and later are joined with LF). */
  private dataLines = 0;

  constructor(private readonly json: JsonScanner) {}

  write(buf: Uint8Array): void {
    const end = buf.length;
    let state = this.state;
    let i = 0;
    // The next LF and CR at or after i, looked up lazily: one indexOf per line end, not per line.
    let nextLf = -1;
    let nextCr = -1;
    while (i < end) {
      if (state === VALUE || state === IGNORE) {
        if (nextLf < i) nextLf = indexOrEnd(buf, LF, i);
        if (nextCr < i) nextCr = indexOrEnd(buf, CR, i);
        const lineEnd = Math.min(nextLf, nextCr);
        if (state === VALUE && lineEnd > i) this.json.write(buf, i, lineEnd);
        i = lineEnd;
        if (i === end) break;
        state = this.endLine(buf[i]!);
        i++;
        continue;
      }
      const c = buf[i]!;
      if (this.afterCr) {
        this.afterCr = false;
        if (c === LF) {
          i++;
          continue;
        }
      }
      switch (state) {
        case BOM_1:
          if (c === 0xef) {
            state = BOM_2;
            i++;
          } else {
            state = LINE_START;
          }
          break;
        case BOM_2:
        case BOM_3:
          if (c === (state === BOM_2 ? 0xbb : 0xbf)) {
            state = state === BOM_2 ? BOM_3 : LINE_START;
            i++;
          } else {
            // Not a BOM after all: the line starts with a byte no field name "data" starts with.
            state = IGNORE;
          }
          break;
        case LINE_START:
          if (c === LF || c === CR) {
            // A blank line: the event ends, the next one starts with a fresh document.
            this.json.reset();
            this.dataLines = 0;
            this.afterCr = c === CR;
            i++;
          } else if (c === DATA[0]) {
            this.fieldAt = 1;
            state = FIELD;
            i++;
          } else {
            state = IGNORE; // a comment (`:`) or another field
          }
          break;
        case FIELD:
          if (c === DATA[this.fieldAt]) {
            state = ++this.fieldAt === DATA.length ? AFTER_DATA : FIELD;
            i++;
          } else {
            state = IGNORE;
          }
          break;
        case AFTER_DATA:
          if (c === COLON) {
            this.startDataLine();
            state = VALUE;
            i++;
          } else if (c === LF || c === CR) {
            // `data` alone is a data line with an empty value.
            this.startDataLine();
            state = this.endLine(c);
            i++;
          } else {
            state = IGNORE; // `datum:`, `data-x:` ...
          }
          break;
      }
    }
    this.state = state;
  }

  private startDataLine(): void {
    if (this.dataLines > 0) this.json.write(JOIN, 0, 1);
    this.dataLines++;
  }

  private endLine(c: number): number {
    this.afterCr = c === CR;
    return LINE_START;
  }
}

function indexOrEnd(buf: Uint8Array, byte: number, from: number): number {
  const at = buf.indexOf(byte, from);
  return at === -1 ? buf.length : at;
}
