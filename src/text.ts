// The one-line form of any value that events, logs and error messages quote: whitespace runs
// become one space, and what is longer than `max` characters is cut with an ellipsis.

export function oneLine(value: unknown, max = 200): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
