// A small upstream for trying tollgate without an API of your own: it echoes what it received,
// so you can see the headers tollgate adds (Tollgate-Client, X-Forwarded-For, Via, ...).
import { createServer } from "node:http";

export function startDemoUpstream(port = 3000, host = "127.0.0.1") {
  const server = createServer((req, res) => {
    const body = JSON.stringify(
      { ok: true, method: req.method, path: req.url, headers: req.headers },
      null,
      2,
    );
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve(server));
  });
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const port = Number(process.env.PORT ?? 3000);
  const host = process.env.HOST ?? "127.0.0.1";
  await startDemoUpstream(port, host);
  console.log(`demo upstream on http://${host}:${port}`);
}
