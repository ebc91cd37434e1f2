// What runtime state stored in Redis is read as: text another instance (maybe another version)
// wrote, so never trusted blindly. A JSON object, or undefined for anything else.

export function storedObject(text: string): Record<string, unknown> | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  return typeof value === "object" && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}
