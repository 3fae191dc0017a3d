// Tool results in the conversation: caps, sizes and calls. A result longer than its cap keeps its
// head and tail, with a note of what was left out.

import type { ModelMessage, ToolResultPart } from 'ai';

export function isToolResult(part: { type: string }): part is ToolResultPart {
  return part.type === 'tool-result';
}

export function outputText(part: ToolResultPart): string {
  const output = part.output;
  switch (output.type) {
    case 'text':
    case 'error-text':
      return output.value;
    case 'json':
    case 'error-json':
      return JSON.stringify(output.value);
    case 'content':
      return output.value.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
    default:
      return output.reason ?? '';
  }
}

export function outputChars(part: ToolResultPart): number {
  return outputText(part).length;
}

/** The arguments of every tool call, by call id. */
export function toolCalls(messages: readonly ModelMessage[]): Map<string, unknown> {
  const calls = new Map<string, unknown>();
  for (const m of messages) {
    if (m.role !== 'assistant' || typeof m.content === 'string') continue;
    for (const part of m.content)
      if (part.type === 'tool-call') calls.set(part.toolCallId, part.input);
  }
  return calls;
}

/** The messages with every tool result longer than `maxChars` cut to its head and tail. */
export function capAll(messages: readonly ModelMessage[], maxChars: number): ModelMessage[] {
  return messages.map((m) => {
    if (m.role !== 'tool' || !m.content.some((p) => isToolResult(p) && outputChars(p) > maxChars))
      return m;
    return {
      ...m,
      content: m.content.map((part) => {
        if (!isToolResult(part) || outputChars(part) <= maxChars) return part;
        const type = part.output.type === 'error-text' || part.output.type === 'error-json';
        return {
          ...part,
          output: {
            type: type ? ('error-text' as const) : ('text' as const),
            value: headAndTail(outputText(part), maxChars, part.toolName),
          },
        };
      }),
    };
  });
}

const NUMBERED_LINE = /^\s*(\d+)\t/;

/**
 * The start and the end of a long text, cut at line ends, with a note of what was left out in
 * between; for read_file's numbered lines, the note says how to read them.
 */
export function headAndTail(text: string, maxChars: number, toolName: string): string {
  const room = Math.max(0, maxChars - 300);
  let head = text.slice(0, Math.floor(room * 0.6));
  let tail = text.slice(text.length - Math.floor(room * 0.4));
  const headEnd = head.lastIndexOf('\n');
  if (headEnd > 0) head = head.slice(0, headEnd + 1);
  const tailStart = tail.indexOf('\n');
  if (tailStart >= 0 && tailStart < tail.length - 1) tail = tail.slice(tailStart + 1);
  const omitted = text.slice(head.length, text.length - tail.length);
  const lines = omitted.split('\n').length - (omitted.endsWith('\n') ? 1 : 0);
  const first = omitted.match(NUMBERED_LINE)?.[1];
  const last = omitted.trimEnd().split('\n').at(-1)?.match(NUMBERED_LINE)?.[1];
  const size = `${lines.toLocaleString('en-US')} lines, ${omitted.length.toLocaleString('en-US')} characters`;
  const how =
    toolName === 'read_file' && first && last
      ? `; read_file with startLine ${first} and endLine ${last} shows them`
      : '';
  return `${head}[… ${size} left out here to fit the model's context window${how} …]\n${tail}`;
}
