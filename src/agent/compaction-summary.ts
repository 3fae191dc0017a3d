// Compaction: the summary request and the message that replaces the older history. The model
// call itself is Conversation's (conversation.ts); this module writes what it sends and keeps.

import type { AssistantModelMessage, ModelMessage, UserModelMessage } from 'ai';
import { markOf } from './history.ts';
import { isToolResult, outputText } from './tool-results.ts';

export const SUMMARY_INSTRUCTIONS = `You write the working notes of a software engineering agent whose conversation
has grown too long for its context window. You are given the older part of that conversation:
the user's requests, the agent's messages, its tool calls with shortened results, and perhaps
the notes of an earlier summary. The agent will continue from your notes and its most recent
work alone, so keep everything it needs and nothing else:
1. Done so far: each change made, with the file paths and what changed.
2. Findings: what the agent learned that the work depends on: files, functions, types,
   conventions, commands run and their results.
3. Decisions and constraints, the user's corrections included.
4. Problems met, and how they were solved or why not.
5. Still to do, in order.
The user's requests are kept word for word elsewhere: do not repeat them. Be specific (exact
paths, names, error messages) and brief. Never write down secrets. Plain text only.`;

/** The older messages as one text for the summariser, shortened to `maxChars`. */
export function summaryRequest(older: readonly ModelMessage[], maxChars: number): string {
  const render = (excerpt: number): string[] =>
    older.flatMap((m): string[] => {
      const mark = markOf(m);
      if (mark?.summary !== undefined) {
        return [
          ...(mark.prompts ?? []).map((p) => `<request>\n${p}\n</request>`),
          `<earlier-notes>\n${mark.summary}\n</earlier-notes>`,
        ];
      }
      if (m.role === 'user') return [`<request>\n${promptOf(m)}\n</request>`];
      if (m.role === 'assistant') return assistantLines(m, excerpt);
      if (m.role === 'tool') {
        return m.content.filter(isToolResult).map((part) => {
          const text = outputText(part);
          const shown =
            text.length > excerpt
              ? `${text.slice(0, excerpt)}\n[… ${text.length - excerpt} more characters …]`
              : text;
          return `<tool-result name="${part.toolName}">\n${shown}\n</tool-result>`;
        });
      }
      return [];
    });
  let items = render(1_500);
  if (length(items) > maxChars) items = render(300);
  if (length(items) > maxChars) {
    // Keep the start (earlier notes, first requests) and as much of the end as fits.
    const head = items.slice(0, 3);
    const tail: string[] = [];
    let size = length(head) + 200;
    for (let i = items.length - 1; i >= head.length; i--) {
      const item = items[i] ?? '';
      if (size + item.length > maxChars) break;
      tail.unshift(item);
      size += item.length + 1;
    }
    const dropped = items.length - head.length - tail.length;
    items = [...head, `[… ${dropped} items of the conversation left out …]`, ...tail];
  }
  return `The older part of the conversation, to summarise:\n\n<conversation>\n${items.join('\n')}\n</conversation>\n\nWrite the notes now.`;
}

function length(items: readonly string[]): number {
  return items.reduce((n, s) => n + s.length + 1, 0);
}

/** The agent's words (at most four excerpts long) and its tool calls (one excerpt). */
function assistantLines(m: AssistantModelMessage, excerpt: number): string[] {
  const said = (text: string) =>
    `<agent>\n${text.length > excerpt * 4 ? `${text.slice(0, excerpt * 4)}…` : text}\n</agent>`;
  if (typeof m.content === 'string') return [said(m.content)];
  return m.content.flatMap((part): string[] => {
    if (part.type === 'text' && part.text.trim() !== '') return [said(part.text)];
    if (part.type === 'tool-call') {
      const input = JSON.stringify(part.input) ?? '';
      const shown = input.length > excerpt ? `${input.slice(0, excerpt)}…` : input;
      return [`<tool-call name="${part.toolName}">${shown}</tool-call>`];
    }
    return [];
  });
}

/** A user message's prompt: its text, or its first text part (later parts are Errand's notes). */
export function promptOf(m: UserModelMessage): string {
  if (typeof m.content === 'string') return m.content;
  const first = m.content.find((p) => p.type === 'text');
  return first?.type === 'text' ? first.text : '';
}

export function userParts(m: UserModelMessage): Exclude<UserModelMessage['content'], string> {
  return typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
}

export function checkpointText(
  earlier: readonly string[],
  summary: string,
  current: boolean,
): string {
  const requests = earlier.map((p, i) => `<request n="${i + 1}">\n${p}\n</request>`).join('\n');
  const next = current
    ? 'The request you are working on now follows, word for word; after it, your most recent work as it happened.'
    : 'Your most recent work follows as it happened.';
  return `[Errand: this job's conversation grew past what your context window holds, so its older part was replaced by the notes below. ${
    earlier.length > 0 ? "The user's earlier requests are kept word for word. " : ''
  }Re-read files or re-run commands when you need their exact content.]
${requests ? `\n${requests}\n` : ''}
<notes-on-earlier-work>
${summary}
</notes-on-earlier-work>

${next}`;
}
