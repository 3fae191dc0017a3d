// A GitLab job's trace as the text a person reads on the job's page: GitLab's traces carry
// terminal colours and collapsible-section markers, which a prompt has no use for.
import { stripVTControlCharacters } from 'node:util';

/** A GitLab job trace as plain text: no colours, no section markers, no carriage returns. */
export function plainTrace(text: string): string {
  return stripVTControlCharacters(text)
    .replace(/section_(?:start|end):\d+:[^\r\n]*\r/g, '')
    .replace(/\r\n/g, '\n')
    .replace(/\r/g, '\n');
}
