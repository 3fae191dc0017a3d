// The diff view shared by the review page and the dashboard's job page: parses the unified
// git diff a job stores (`jobs.review_diff`, possibly cut off at its size cap) into files and
// hunks, and renders it as HTML with every byte of repository content escaped. A diff comes
// from an agent's work, so file names and lines are hostile input.

import { escapeHtml } from './html.ts';

export type FileStatus = 'added' | 'deleted' | 'renamed' | 'copied' | 'modified';

export type DiffLineKind = 'context' | 'add' | 'del';

export interface DiffLine {
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

export interface DiffHunk {
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

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/** Parses a unified git diff; a diff cut off anywhere yields the files up to the cut. */
export function parseDiff(diff: string): DiffFile[] {
  const files: DiffFile[] = [];
  let file: DiffFile | null = null;
  let hunk: DiffHunk | null = null;
  let oldLeft = 0;
  let newLeft = 0;
  let oldNo = 0;
  let newNo = 0;
  const lines = diff.split('\n');
  // A diff ends with a newline; the empty string after it is not a line.
  if (lines.at(-1) === '') lines.pop();
  for (const line of lines) {
    if (file && hunk && (oldLeft > 0 || newLeft > 0)) {
      const mark = line[0];
      if (mark === '+' && newLeft > 0) {
        hunk.lines.push({
          kind: 'add',
          text: line.slice(1),
          oldLine: null,
          newLine: newNo++,
          noNewline: false,
        });
        newLeft--;
        file.additions++;
        continue;
      }
      if (mark === '-' && oldLeft > 0) {
        hunk.lines.push({
          kind: 'del',
          text: line.slice(1),
          oldLine: oldNo++,
          newLine: null,
          noNewline: false,
        });
        oldLeft--;
        file.deletions++;
        continue;
      }
      // Some tools strip the space of an empty context line.
      if ((mark === ' ' || line === '') && oldLeft > 0 && newLeft > 0) {
        hunk.lines.push({
          kind: 'context',
          text: line.slice(1),
          oldLine: oldNo++,
          newLine: newNo++,
          noNewline: false,
        });
        oldLeft--;
        newLeft--;
        continue;
      }
      if (mark === '\\') {
        const last = hunk.lines.at(-1);
        if (last) last.noNewline = true;
        continue;
      }
      // Anything else means the hunk's counts were wrong: read on as headers.
      oldLeft = 0;
      newLeft = 0;
    }
    if (line.startsWith('\\') && hunk) {
      const last = hunk.lines.at(-1);
      if (last) last.noNewline = true;
      continue;
    }
    if (line.startsWith('diff --git ')) {
      hunk = null;
      const paths = headerPaths(line.slice('diff --git '.length));
      file = {
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
      files.push(file);
      continue;
    }
    if (!file) continue;
    const hunkHead = HUNK.exec(line);
    if (hunkHead) {
      oldNo = Number(hunkHead[1]);
      newNo = Number(hunkHead[3]);
      oldLeft = hunkHead[2] === undefined ? 1 : Number(hunkHead[2]);
      newLeft = hunkHead[4] === undefined ? 1 : Number(hunkHead[4]);
      hunk = { header: line, oldStart: oldNo, newStart: newNo, lines: [] };
      file.hunks.push(hunk);
      continue;
    }
    if (hunk) continue;
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
  // Git ends every diff with a newline: without one, the last line was cut off.
  const cutMidLine = diff.length > 0 && !diff.endsWith('\n');
  if (file && ((hunk && (oldLeft > 0 || newLeft > 0)) || cutMidLine)) file.partial = true;
  return files;
}

/** The name a file is listed under: its new path, its old one when deleted, both when moved. */
export function fileLabel(file: DiffFile): string {
  const oldPath = file.oldPath ?? '(unknown)';
  const newPath = file.newPath ?? '(unknown)';
  if (file.status === 'added') return newPath;
  if (file.status === 'deleted') return oldPath;
  if (file.oldPath !== null && file.newPath !== null && file.oldPath !== file.newPath) {
    return `${oldPath} → ${newPath}`;
  }
  return file.newPath ?? oldPath;
}

function counts(additions: number, deletions: number): string {
  return `<span class="diff-plus">+${additions}</span> <span class="diff-minus">−${deletions}</span>`;
}

function lineNumber(n: number | null): string {
  return `<td class="diff-num">${n ?? ''}</td>`;
}

function note(file: DiffFile): string {
  const notes: string[] = [];
  if (file.oldMode && file.newMode && file.oldMode !== file.newMode) {
    notes.push(`Mode ${escapeHtml(file.oldMode)} → ${escapeHtml(file.newMode)}.`);
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
  return notes.map((n) => `<p class="diff-note">${n}</p>`).join('');
}

function table(file: DiffFile): string {
  if (file.hunks.length === 0) return '';
  const rows: string[] = [];
  for (const hunk of file.hunks) {
    rows.push(
      `<tr class="diff-hunk"><td class="diff-num"></td><td class="diff-num"></td><td class="diff-code">${escapeHtml(hunk.header)}</td></tr>`,
    );
    for (const line of hunk.lines) {
      const sign = line.kind === 'add' ? '+' : line.kind === 'del' ? '-' : ' ';
      const eol = line.noNewline ? '<span class="diff-eol"> (no newline at end)</span>' : '';
      rows.push(
        `<tr class="diff-${line.kind}">${lineNumber(line.oldLine)}${lineNumber(line.newLine)}<td class="diff-code">${escapeHtml(sign + line.text)}${eol}</td></tr>`,
      );
    }
  }
  return `<div class="diff-scroll"><table class="diff-table"><tbody>\n${rows.join('\n')}\n</tbody></table></div>`;
}

/**
 * The HTML of a diff: a list of the files with their +/− counts, then one section per file
 * with old and new line numbers. `idPrefix` keeps the anchors apart when a page shows two.
 */
export function renderDiff(files: DiffFile[], opts: { idPrefix?: string } = {}): string {
  const prefix = opts.idPrefix ?? 'diff';
  if (files.length === 0) return '<p class="diff-note">No changes.</p>';
  const additions = files.reduce((sum, f) => sum + f.additions, 0);
  const deletions = files.reduce((sum, f) => sum + f.deletions, 0);
  const list = files
    .map(
      (f, i) =>
        `<li><a href="#${prefix}-${i + 1}"><code>${escapeHtml(fileLabel(f))}</code></a> <span class="diff-status diff-status-${f.status}">${f.status}</span>${f.binary ? ' <span class="diff-status">binary</span>' : ''} ${counts(f.additions, f.deletions)}</li>`,
    )
    .join('\n');
  const sections = files
    .map(
      (f, i) =>
        `<section class="diff-file" id="${prefix}-${i + 1}"><h3 class="diff-file-head"><code>${escapeHtml(fileLabel(f))}</code> <span class="diff-status diff-status-${f.status}">${f.status}</span> ${counts(f.additions, f.deletions)}</h3>\n${note(f)}${table(f)}</section>`,
    )
    .join('\n');
  const summary = `${files.length} ${files.length === 1 ? 'file' : 'files'} changed, ${counts(additions, deletions)}`;
  return `<nav class="diff-files" aria-label="Changed files"><p>${summary}</p><ul>\n${list}\n</ul></nav>\n${sections}`;
}

/** The styles of `renderDiff`'s markup, light and dark, for a page's stylesheet. */
export const DIFF_STYLE = `.diff-files ul{list-style:none;padding:0;margin:0 0 1rem}.diff-files li{padding:.15rem 0;overflow-wrap:anywhere}
.diff-plus{color:#116329}.diff-minus{color:#82071e}.diff-status{font-size:.8em;border:1px solid #d0d7de;border-radius:1em;padding:0 .5em;color:#59636e}
.diff-file{border:1px solid #d0d7de;border-radius:6px;margin:1rem 0;overflow:hidden}
.diff-file-head{font-size:.95rem;margin:0;padding:.5rem .75rem;background:#f6f8fa;border-bottom:1px solid #d0d7de;overflow-wrap:anywhere}
.diff-note{margin:.5rem .75rem;color:#59636e}.diff-scroll{overflow-x:auto}
.diff-table{border-collapse:collapse;width:100%;font:12px/1.5 ui-monospace,SFMono-Regular,Menlo,monospace}
.diff-table td{padding:0 .5rem;vertical-align:top}.diff-code{white-space:pre;width:100%}
.diff-num{color:#59636e;text-align:right;user-select:none;width:1%;min-width:2rem;white-space:nowrap}
.diff-add{background:#dafbe1}.diff-del{background:#ffebe9}.diff-hunk{background:#ddf4ff;color:#59636e}.diff-eol{color:#59636e;font-style:italic}
@media (prefers-color-scheme:dark){.diff-plus{color:#3fb950}.diff-minus{color:#f85149}.diff-status,.diff-num,.diff-note,.diff-eol{color:#9198a1}
.diff-file,.diff-file-head,.diff-status{border-color:#3d444d}.diff-file-head{background:#151b23}
.diff-add{background:#12261e}.diff-del{background:#25171c}.diff-hunk{background:#121d2f;color:#9198a1}}`;
