// One GET of a JSON document from an identity provider (its discovery document or its JWKS),
// with one deadline over connecting, TLS and the whole body, a size cap, and certificate
// verification always on (against `ca` when the config names one, the system's CAs otherwise).
// Every failure is a FetchError whose outcome labels the fetch metric and whose message an
// operator can act on; it never throws anything else and never leaves the socket open.
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { request as httpsRequest } from "node:https";

/** A JWKS is a few kilobytes; ten keys of RSA-4096 are ~10 KiB. Past this the answer is refused. */
export const MAX_DOCUMENT_BYTES = 256 * 1024;

export type FetchOutcome = "ok" | "timeout" | "tls" | "network" | "status" | "too_large" | "invalid";

export class FetchError extends Error {
  constructor(
    readonly outcome: Exclude<FetchOutcome, "ok">,
    message: string,
  ) {
    super(message);
    this.name = "FetchError";
  }
}

export interface FetchOptions {
  deadlineMs: number;
  /** PEM certificates trusted for this host instead of the system's. */
  ca?: string | undefined;
  maxBytes?: number;
  /** Aborts the fetch (the key set stopped): it fails at once, its socket destroyed. */
  signal?: AbortSignal | undefined;
}

export interface FetchedJson {
  json: unknown;
  headers: IncomingHttpHeaders;
}

export type FetchJson = (url: URL, options: FetchOptions) => Promise<FetchedJson>;

/** Hosts plain http may be used for: nothing off the machine can read or change the answer. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** Why a URL cannot be fetched from, or undefined: https, or http to a loopback host only. */
export function unfetchableUrl(text: string): string | undefined {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return `"${text}" is not an absolute URL (expected https://host/path)`;
  }
  if (url.protocol === "https:") return undefined;
  if (url.protocol === "http:") {
    return isLoopbackHost(url.hostname)
      ? undefined
      : `http:// is accepted only on a loopback address (127.0.0.1, ::1, localhost): anyone on the path could replace the keys; use https://${url.host}${url.pathname}`;
  }
  return `${url.protocol}// is not a scheme keys are fetched over: use https://`;
}

export const fetchJson: FetchJson = (url, options) =>
  new Promise<FetchedJson>((resolve, reject) => {
    const why = unfetchableUrl(url.href);
    if (why !== undefined) return reject(new FetchError("invalid", why));
    const maxBytes = options.maxBytes ?? MAX_DOCUMENT_BYTES;
    const request = url.protocol === "https:" ? httpsRequest : httpRequest;
    let settled = false;
    const signal = options.signal;
    const stopped = () => fail(new FetchError("network", "the fetch was stopped"));
    // The signal outlives every fetch (one per key set): a listener left on it would keep each
    // fetch's request and answer alive for the life of the process (measured: a 208 KB JWKS
    // fetched 200 times kept 89.5 MB).
    const settle = () => {
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", stopped);
    };
    const fail = (err: FetchError) => {
      if (settled) return;
      settle();
      req.destroy();
      reject(err);
    };
    const req = request(url, {
      method: "GET",
      headers: { accept: "application/json", "accept-encoding": "identity" },
      // Verification is never turned off; a private CA replaces the system's, it does not add.
      rejectUnauthorized: true,
      ...(options.ca !== undefined ? { ca: options.ca } : {}),
      // A fresh connection each time: fetches are minutes apart, and no socket outlives one.
      agent: false,
    });
    // One deadline for everything (DNS, connect, TLS, headers, body), unlike socket timeouts
    // that reset on every byte and let a peer that drips the body hold the fetch forever.
    const timer = setTimeout(
      () => fail(new FetchError("timeout", `no complete answer within ${options.deadlineMs} ms`)),
      options.deadlineMs,
    );
    req.on("error", (err) => fail(classify(err)));
    if (signal?.aborted) stopped();
    else signal?.addEventListener("abort", stopped, { once: true });
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      if (status !== 200) {
        res.resume();
        const where = res.headers.location
          ? ` to ${res.headers.location} (redirects are not followed: configure the final URL)`
          : "";
        return fail(new FetchError("status", `answered ${status}${where}, not 200`));
      }
      const declared = Number(res.headers["content-length"]);
      if (Number.isFinite(declared) && declared > maxBytes)
        return fail(new FetchError("too_large", `the answer is ${declared} bytes, more than ${maxBytes}`));
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > maxBytes) fail(new FetchError("too_large", `the answer is more than ${maxBytes} bytes`));
        else chunks.push(chunk);
      });
      res.on("error", (err) => fail(classify(err)));
      res.on("aborted", () =>
        fail(new FetchError("network", "the connection closed before the answer ended")),
      );
      res.on("end", () => {
        if (settled) return;
        let json: unknown;
        try {
          json = JSON.parse(Buffer.concat(chunks).toString("utf8"));
        } catch {
          return fail(new FetchError("invalid", "the answer is not JSON"));
        }
        settle();
        resolve({ json, headers: res.headers });
      });
    });
    req.end();
  });

/** TLS failures (an untrusted or mismatched certificate) told apart from the network's. */
function classify(err: Error): FetchError {
  const code = (err as NodeJS.ErrnoException).code ?? "";
  if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME|ERR_SSL|ERR_TLS/.test(code))
    return new FetchError(
      "tls",
      `the TLS certificate is refused: ${err.message} (${code}); trust its CA with ca_file`,
    );
  return new FetchError(
    "network",
    `${err.message}${code && !err.message.includes(code) ? ` (${code})` : ""}`,
  );
}
