// The diff view shared by the review page and the dashboard's job page: parses the unified
// git diff a job stores (`jobs.review_diff`, possibly cut off at its size cap) into files and
// hunks, and renders it as HTML with every byte of repository content escaped. A diff comes
// from an agent's work, so file names and lines are hostile input.

import parseUnified from 'parse-diff';
import { html, type SafeHtml } from './html.ts';

type FileStatus = 'added' | 'deleted' | 'renamed' | 'copied' | 'modified';

type DiffLineKind = 'context' | 'add' | 'del';

interface DiffLine {
  kind: DiffLineKind;
  /** The line without its leading ' ', '+' or '-'. */
  text: string;
  /** Its number in the old file; null for an added line. */
  oldLine: number | null;
  /** Its number in the new file; null for a deleted line. */
  newLine: number | null;
  /** Git's "\ No newline at end of file" followed it. */
  noNewline: boolean;
}

interface DiffHunk {
  /** The `@@ … @@` line as git wrote it. */
  header: string;
  oldStart: number;
  newStart: number;
  lines: DiffLine[];
}

export interface DiffFile {
  /** The path before the change; null for an added file. */
  oldPath: string | null;
  /** The path after the change; null for a deleted file. */
  newPath: string | null;
  status: FileStatus;
  binary: boolean;
  oldMode: string | null;
  newMode: string | null;
  additions: number;
  deletions: number;
  hunks: DiffHunk[];
  /** The diff ends inside this file's changes (the stored diff was cut off). */
  partial: boolean;
}

const C_ESCAPES: Record<string, number> = {
  a: 7,
  b: 8,
  t: 9,
  n: 10,
  v: 11,
  f: 12,
  r: 13,
  '"': 34,
  '\\': 92,
};

/**
 * Git's C-style quoted path (`"a\303\251.txt"`, used for names with bytes outside printable
 * ASCII, quotes or backslashes) to text; bytes that are not UTF-8 become U+FFFD. Returns the
 * unquoted string and where it ended, or null when `s` at `start` is not a complete quoted path.
 */
function unquote(s: string, start: number): { value: string; end: number } | null {
  if (s[start] !== '"') return null;
  const bytes: number[] = [];
  const encoder = new TextEncoder();
  let i = start + 1;
  while (i < s.length) {
    const c = s[i] ?? '';
    if (c === '"') {
      return { value: new TextDecoder('utf-8').decode(new Uint8Array(bytes)), end: i + 1 };
    }
    if (c === '\\') {
      const next = s[i + 1] ?? '';
      const octal = /^[0-7]{3}/.exec(s.slice(i + 1, i + 4));
      if (octal) {
        bytes.push(Number.parseInt(octal[0], 8) & 0xff);
        i += 4;
        continue;
      }
      const code = C_ESCAPES[next];
      if (code === undefined) return null;
      bytes.push(code);
      i += 2;
      continue;
    }
    const cp = s.codePointAt(i) ?? 0;
    const ch = String.fromCodePoint(cp);
    bytes.push(...encoder.encode(ch));
    i += ch.length;
  }
  return null;
}

/** A path as git prints it after a marker: quoted or plain, without its `a/` or `b/` prefix. */
function parsePath(raw: string, prefix: string): string | null {
  // Git ends a plain name that contains a space with a tab, so that patch can find its end.
  const text = raw.endsWith('\t') ? raw.slice(0, -1) : raw;
  if (text === '/dev/null') return null;
  const quoted = unquote(text, 0);
  const value = quoted ? quoted.value : text;
  return value.startsWith(prefix) ? value.slice(prefix.length) : value;
}

/**
 * The two paths of a `diff --git a/… b/…` line. Unquoted names may contain spaces, so
 * without quotes the line is only unambiguous when both names are the same (which is the
 * case whenever git leaves the other header lines out: mode changes, binary and empty files).
 */
function headerPaths(rest: string): { oldPath: string; newPath: string } | null {
  if (rest.startsWith('"')) {
    const a = unquote(rest, 0);
    if (!a || rest[a.end] !== ' ') return null;
    const bRaw = rest.slice(a.end + 1);
    const b = bRaw.startsWith('"') ? unquote(bRaw, 0)?.value : bRaw;
    if (b === undefined) return null;
    return { oldPath: a.value.replace(/^a\//, ''), newPath: b.replace(/^b\//, '') };
  }
  const quotedB = rest.indexOf(' "b/');
  if (quotedB !== -1 && rest.endsWith('"')) {
    const b = unquote(rest, quotedB + 1);
    if (b) {
      return {
        oldPath: rest.slice(0, quotedB).replace(/^a\//, ''),
        newPath: b.value.replace(/^b\//, ''),
      };
    }
  }
  if (rest.length % 2 === 1) {
    const half = (rest.length - 1) / 2;
    const a = rest.slice(0, half);
    const b = rest.slice(half + 1);
    if (a.startsWith('a/') && b.startsWith('b/') && a.slice(2) === b.slice(2)) {
      return { oldPath: a.slice(2), newPath: b.slice(2) };
    }
  }
  return null;
}

/** A hunk's header line. */
const HUNK = /^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@/;

/**
 * One file's header lines (before its first hunk): its paths, how it changed, its modes and
 * whether it is binary. parse-diff reads paths without git's quoting and knows no renames or
 * binary files, so these stay ours.
 */
function fileHeader(lines: readonly string[]): DiffFile {
  const first = lines[0] ?? '';
  const paths = headerPaths(first.slice('diff --git '.length));
  const file: DiffFile = {
    oldPath: paths?.oldPath ?? null,
    newPath: paths?.newPath ?? null,
    status: 'modified',
    binary: false,
    oldMode: null,
    newMode: null,
    additions: 0,
    deletions: 0,
    hunks: [],
    partial: false,
  };
  for (const line of lines.slice(1)) {
    if (line.startsWith('--- ')) {
      const path = parsePath(line.slice(4), 'a/');
      if (path === null) file.status = 'added';
      file.oldPath = path;
    } else if (line.startsWith('+++ ')) {
      const path = parsePath(line.slice(4), 'b/');
      if (path === null) file.status = 'deleted';
      file.newPath = path;
    } else if (line.startsWith('new file mode ')) {
      file.status = 'added';
      file.newMode = line.slice('new file mode '.length);
      file.oldPath = null;
    } else if (line.startsWith('deleted file mode ')) {
      file.status = 'deleted';
      file.oldMode = line.slice('deleted file mode '.length);
      file.newPath = null;
    } else if (line.startsWith('old mode ')) {
      file.oldMode = line.slice('old mode '.length);
    } else if (line.startsWith('new mode ')) {
      file.newMode = line.slice('new mode '.length);
    } else if (line.startsWith('rename from ') || line.startsWith('copy from ')) {
      file.status = line.startsWith('rename') ? 'renamed' : 'copied';
      file.oldPath = parsePath(line.slice(line.indexOf(' from ') + 6), '');
    } else if (line.startsWith('rename to ') || line.startsWith('copy to ')) {
      file.newPath = parsePath(line.slice(line.indexOf(' to ') + 4), '');
    } else if (line.startsWith('Binary files ') || line === 'GIT binary patch') {
      file.binary = true;
    }
  }
  return file;
}

/**
 * A file's hunks as parse-diff reads them (line numbers from the hunk headers' counts, so a
 * `+++` or `---` inside a hunk is a line, not a header), with git's "\ No newline at end of
 * file" folded into the line before it. A hunk with fewer lines than its header counts was cut
 * off.
 */
function fileHunks(text: string, file: DiffFile): void {
  for (const chunk of parseUnified(text).flatMap((parsed) => parsed.chunks)) {
    const hunk: DiffHunk = {
      header: chunk.content,
      oldStart: chunk.oldStart,
      newStart: chunk.newStart,
      lines: [],
    };
    let oldSeen = 0;
    let newSeen = 0;
    for (const change of chunk.changes) {
      if (change.content.startsWith('\\')) {
        const last = hunk.lines.at(-1);
        if (last) last.noNewline = true;
        continue;
      }
      const text = change.content.slice(1);
      if (change.type === 'add') {
        hunk.lines.push({ kind: 'add', text, oldLine: null, newLine: change.ln, noNewline: false });
        file.additions++;
        newSeen++;
      } else if (change.type === 'del') {
        hunk.lines.push({ kind: 'del', text, oldLine: change.ln, newLine: null, noNewline: false });
        file.deletions++;
        oldSeen++;
      } else {
        hunk.lines.push({
          kind: 'context',
          text,
          oldLine: change.ln1,
          newLine: change.ln2,
          noNewline: false,
        });
        oldSeen++;
        newSeen++;
      }
    }
    if (oldSeen < chunk.oldLines || newSeen < chunk.newLines) file.partial = true;
    file.hunks.push(hunk);
  }
}

/** Parses a unified git diff; a diff cut off anywhere yields the files up to the cut. */
export function parseDiff(diff: string): DiffFile[] {
  const lines = diff.split('\n');
  // A diff ends with a newline; the empty string after it is not a line.
  if (lines.at(-1) === '') lines.pop();
  // Every line of a hunk starts with ' ', '+', '-' or '\\': a line that starts with
  // `diff --git ` is always the next file's header.
  const sections: string[][] = [];
  for (const line of lines) {
    if (line.startsWith('diff --git ')) sections.push([line]);
    else sections.at(-1)?.push(line);
  }
  const files = sections.map((section) => {
    const start = section.findIndex((line) => HUNK.test(line));
    const file = fileHeader(start === -1 ? section : section.slice(0, start));
    if (start !== -1) fileHunks(section.join('\n'), file);
    return file;
  });
  // Git ends every diff with a newline: without one, the last line was cut off.
  const last = files.at(-1);
  if (last && diff.length > 0 && !diff.endsWith('\n')) last.partial = true;
  return files;
}

/** The name a file is listed under: its new path, its old one when deleted, both when moved. */
function fileLabel(file: DiffFile): string {
  const oldPath = file.oldPath ?? '(unknown)';
  const newPath = file.newPath ?? '(unknown)';
  if (file.status === 'added') return newPath;
  if (file.status === 'deleted') return oldPath;
  if (file.oldPath !== null && file.newPath !== null && file.oldPath !== file.newPath) {
    return `${oldPath} → ${newPath}`;
  }
  return file.newPath ?? oldPath;
}

function counts(additions: number, deletions: number): SafeHtml {
  return html`<span class="diff-plus">+${additions}</span> <span class="diff-minus">−${deletions}</span>`;
}

function lineNumber(n: number | null): SafeHtml {
  return html`<td class="diff-num">${n ?? ''}</td>`;
}

function note(file: DiffFile): SafeHtml {
  const notes: (string | SafeHtml)[] = [];
  if (file.oldMode && file.newMode && file.oldMode !== file.newMode) {
    notes.push(html`Mode ${file.oldMode} → ${file.newMode}.`);
  }
  if (file.binary) notes.push('Binary file, not shown.');
  else if (file.hunks.length === 0) {
    if (file.status === 'added') notes.push('Empty file.');
    else if (file.status === 'deleted') notes.push('Empty file deleted.');
    else if (file.status === 'renamed' || file.status === 'copied') {
      notes.push('Content unchanged.');
    } else if (notes.length === 0) notes.push('No content changes shown.');
  }
  if (file.partial) notes.push('The diff is cut off in this file.');
  return html`${notes.map((n) => html`<p class="diff-note">${n}</p>`)}`;
}

function table(file: DiffFile): SafeHtml {
  if (file.hunks.length === 0) return html``;
  const rows = file.hunks.flatMap((hunk) => [
    html`<tr class="diff-hunk"><td class="diff-num"></td><td class="diff-num"></td><td class="diff-code">${hunk.header}</td></tr>\n`,
    ...hunk.lines.map((line) => {
      const sign = line.kind === 'add' ? '+' : line.kind === 'del' ? '-' : ' ';
      const eol = line.noNewline ? html`<span class="diff-eol"> (no newline at end)</span>` : '';
      return html`<tr class="diff-${line.kind}">${lineNumber(line.oldLine)}${lineNumber(line.newLine)}<td class="diff-code">${sign + line.text}${eol}</td></tr>\n`;
    }),
  ]);
  return html`<div class="diff-scroll"><table class="diff-table"><tbody>\n${rows}</tbody></table></div>`;
}

/**
 * The HTML of a diff: a list of the files with their +/− counts, then one section per file
 * with old and new line numbers. `idPrefix` keeps the anchors apart when a page shows two.
 * Built with `html`, so every name and line is escaped.
 */
export function renderDiff(files: DiffFile[], opts: { idPrefix?: string } = {}): string {
  const prefix = opts.idPrefix ?? 'diff';
  if (files.length === 0) return html`<p class="diff-note">No changes.</p>`.value;
  const additions = files.reduce((sum, f) => sum + f.additions, 0);
  const deletions = files.reduce((sum, f) => sum + f.deletions, 0);
  const status = (f: DiffFile) =>
    html`<span class="diff-status diff-status-${f.status}">${f.status}</span>`;
  const list = files.map(
    (f, i) =>
      html`<li><a href="#${prefix}-${i + 1}"><code>${fileLabel(f)}</code></a> ${status(f)}${f.binary ? html` <span class="diff-status">binary</span>` : ''} ${counts(f.additions, f.deletions)}</li>\n`,
  );
  const sections = files.map(
    (f, i) =>
      html`<section class="diff-file" id="${prefix}-${i + 1}"><h3 class="diff-file-head"><code>${fileLabel(f)}</code> ${status(f)} ${counts(f.additions, f.deletions)}</h3>\n${note(f)}${table(f)}</section>\n`,
  );
  const summary = html`${files.length} ${files.length === 1 ? 'file' : 'files'} changed, ${counts(additions, deletions)}`;
  return html`<nav class="diff-files" aria-label="Changed files"><p>${summary}</p><ul>\n${list}</ul></nav>\n${sections}`
    .value;
}
