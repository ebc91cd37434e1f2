// Self-signed certificates for TLS tests, made by the openssl CLI (Node can make keys, not
// certificates): a P-256 key and a one-day certificate for localhost and 127.0.0.1.
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TestCertificate {
  certFile: string;
  keyFile: string;
  cert: string;
  key: string;
  /** SHA-256 fingerprint as Node writes it (AA:BB:…), what getPeerCertificate() reports. */
  fingerprint: string;
}

/** A new key and certificate in `dir` (default: a new temporary directory), named `name`. */
export function makeCertificate(
  name = "server",
  dir = mkdtempSync(join(tmpdir(), "tollgate-tls-")),
): TestCertificate {
  const certFile = join(dir, `${name}.crt`);
  const keyFile = join(dir, `${name}.key`);
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:P-256",
      "-nodes",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      "1",
      "-subj",
      `/CN=${name}`,
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
    ],
    { stdio: "ignore" },
  );
  const cert = readFileSync(certFile, "utf8");
  return {
    certFile,
    keyFile,
    cert,
    key: readFileSync(keyFile, "utf8"),
    fingerprint: new X509Certificate(cert).fingerprint256,
  };
}
