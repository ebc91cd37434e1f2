// HTTP/2 requests as the pipeline reads HTTP/1.1 ones. Node's compatibility API (Http2ServerRequest
// and Http2ServerResponse) already gives a stream the shape of IncomingMessage and ServerResponse;
// these subclasses, which the TLS server creates for every stream (tls.ts), close the gaps the
// pipeline would fall into:
//
// - `:authority` is the request's host (RFC 9113 §8.3.1) but stays a pseudo-header in Node, so
//   routing by Host, X-Forwarded-Host and `by: header:host` would see no host at all;
// - `rawHeaders` lists the pseudo-headers as if they were fields, and every field is forwarded;
// - the response has no `destroyed` (a stream the client reset must not be forwarded), its
//   `writableFinished` is true for a stream the client reset, and it has no `shouldKeepAlive`
//   (HTTP/1.1 keep-alive, which an HTTP/2 stream does not have);
// - HTTP/2 forbids the connection-specific fields the gateway writes for HTTP/1.1
//   (`Connection: close` after a refusal; RFC 9113 §8.2.2): Node drops `connection` with a
//   process warning and throws on the others.
import type { OutgoingHttpHeaders } from "node:http";
import {
  Http2ServerRequest,
  Http2ServerResponse,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from "node:http2";
import type { ReadableOptions } from "node:stream";

export class H2Request extends Http2ServerRequest {
  constructor(
    stream: ServerHttp2Stream,
    headers: IncomingHttpHeaders,
    options: ReadableOptions,
    rawHeaders: readonly string[],
  ) {
    super(stream, headers, options, rawHeaders);
    // A client that sends Host as well must send the same host: request-framing.ts refuses it
    // otherwise, so the two never route differently.
    const authority = headers[":authority"];
    if (headers.host === undefined && authority !== undefined) headers.host = authority;
  }
}

const nodeRawHeaders = Object.getOwnPropertyDescriptor(Http2ServerRequest.prototype, "rawHeaders")!.get!;
const FIELDS = Symbol("tollgate.h2.fields");

// The header fields, without the pseudo-headers (`:method`, `:path`, …): what the pipeline
// counts, reads and forwards. Defined on the prototype: the types declare `rawHeaders` a field.
Object.defineProperty(H2Request.prototype, "rawHeaders", {
  get(this: H2Request & { [FIELDS]?: string[] }): string[] {
    let fields = this[FIELDS];
    if (fields === undefined) {
      const raw = nodeRawHeaders.call(this) as string[];
      fields = [];
      for (let i = 0; i < raw.length; i += 2) {
        if (raw[i]!.charCodeAt(0) !== 0x3a) fields.push(raw[i]!, raw[i + 1]!);
      }
      this[FIELDS] = fields;
    }
    return fields;
  },
});

/** Fields that only mean something on an HTTP/1.1 connection; an HTTP/2 response carries none. */
const CONNECTION_SPECIFIC = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

export class H2Response extends Http2ServerResponse<H2Request> {
  /**
   * Set false by the pipeline to close an HTTP/1.1 connection after a refusal: a stream has no
   * connection of its own, so here it changes nothing.
   */
  shouldKeepAlive = true;

  override writeHead(
    statusCode: number,
    headersOrMessage?: OutgoingHttpHeaders | string,
    headers?: OutgoingHttpHeaders,
  ): this {
    if (typeof headersOrMessage === "string")
      return super.writeHead(statusCode, withoutConnectionFields(headers));
    return super.writeHead(statusCode, withoutConnectionFields(headersOrMessage));
  }
}

// Declared outside the class: the Writable the types describe has these as fields, which a
// class may not redefine as getters.
Object.defineProperties(H2Response.prototype, {
  // The stream is destroyed as soon as the client resets it; a request in the limiter by then
  // is not forwarded (stream.ts checks `res.destroyed`).
  destroyed: {
    get(this: H2Response): boolean {
      return this.stream.destroyed;
    },
  },
  // Node's is the stream's, whose writable side Node ends itself when the client resets the
  // stream: a reset would read as a response complete, so the upstream request was never
  // aborted and its body, written into a closed stream, waited for a 'drain' that never comes
  // (the upstream connection held until its timeout). Finished means ended by us, not aborted.
  writableFinished: {
    get(this: H2Response): boolean {
      return this.stream.writableFinished && !this.stream.aborted;
    },
  },
});

function withoutConnectionFields(headers: OutgoingHttpHeaders | undefined): OutgoingHttpHeaders | undefined {
  if (headers === undefined) return undefined;
  let out: OutgoingHttpHeaders | undefined;
  for (const name of CONNECTION_SPECIFIC) {
    if (headers[name] === undefined) continue;
    out ??= { ...headers };
    delete out[name];
  }
  return out ?? headers;
}
