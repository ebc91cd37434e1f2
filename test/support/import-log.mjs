// Preloaded with `node --import` (NODE_OPTIONS) into a gateway under test: registers a resolve
// hook that appends every module URL the process resolves to the file named by
// $TOLLGATE_IMPORT_LOG, so a test can say which modules a real gateway process loaded.
import { register } from "node:module";

const file = process.env.TOLLGATE_IMPORT_LOG;
if (file) register(new URL("./import-log-hooks.mjs", import.meta.url), { data: { file } });
