// Errand's version, read from package.json in one place: for --version, the export file's
// header, User-Agent headers, the MCP server's and the OpenAPI document's version.
import { readFileSync } from 'node:fs';

let cached: string | undefined;

/** The package's version ("0.1.0"), or "unknown" when package.json names none. */
export function errandVersion(): string {
  if (cached === undefined) {
    const pkg: unknown = JSON.parse(
      readFileSync(new URL('../package.json', import.meta.url), 'utf8'),
    );
    const version =
      typeof pkg === 'object' && pkg !== null && 'version' in pkg ? pkg.version : undefined;
    cached = typeof version === 'string' ? version : 'unknown';
  }
  return cached;
}
