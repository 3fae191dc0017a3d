// Summaries are written by a model that read untrusted code: hostile Markdown must come out
// as text, with links only to http(s) and mailto and no image ever loaded.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { renderMarkdown } from './markdown.ts';

/** The tags and attributes in a piece of HTML, to prove nothing but the allowed ones pass. */
function tags(html: string): string[] {
  return [...html.matchAll(/<([a-z0-9]+)((?:\s[^>]*)?)>/gi)].map((m) => m[0]);
}

describe('renderMarkdown', () => {
  test('renders ordinary Markdown', () => {
    const html = renderMarkdown(
      'Add a guide\n\n- **bold** and `code`\n- [docs](https://example.com/docs)\n\n```ts\nconst a = 1 < 2;\n```\n',
    );
    assert.match(html, /<p>Add a guide<\/p>/);
    assert.match(html, /<strong>bold<\/strong>/);
    assert.match(html, /<code>code<\/code>/);
    assert.match(
      html,
      /<a href="https:\/\/example\.com\/docs" rel="nofollow noopener noreferrer">docs<\/a>/,
    );
    assert.match(html, /const a = 1 &lt; 2;/);
  });

  test('raw HTML is shown as text', () => {
    for (const input of [
      '<script>alert(1)</script>',
      '"><img src=x onerror=alert(1)>',
      '<iframe src="https://evil.test"></iframe>',
      '<a href="javascript:alert(1)">x</a>',
      '<style>body{display:none}</style>',
      '# <svg onload=alert(1)>',
      '<!-- comment --><div onclick="alert(1)">',
    ]) {
      const html = renderMarkdown(input);
      for (const tag of tags(html)) {
        // A bare https address inside the text may become a link, never anything else.
        assert.match(
          tag,
          /^<(p|h1|a href="https:\/\/[^"<>]*" rel="nofollow noopener noreferrer")>$/,
          `${input} -> ${html}`,
        );
      }
      assert.match(html, /&lt;/);
    }
  });

  test('links other than http(s) and mailto render as text', () => {
    for (const input of [
      '[x](javascript:alert(1))',
      '[x](JaVaScRiPt:alert(1))',
      '[x](&#106;avascript:alert(1))',
      '[x](java\tscript:alert(1))',
      '[x](vbscript:msgbox(1))',
      '[x](data:text/html;base64,PHNjcmlwdD4=)',
      '[x](file:///etc/passwd)',
      '[x](/relative/path)',
      '<javascript:alert(1)>',
      '[x][r]\n\n[r]: javascript:alert(1)',
    ]) {
      const html = renderMarkdown(input);
      assert.doesNotMatch(html, /<a /, `${input} -> ${html}`);
    }
    assert.match(renderMarkdown('<https://example.com>'), /<a href="https:\/\/example\.com"/);
    assert.match(renderMarkdown('[m](mailto:a@example.com)'), /<a href="mailto:a@example\.com"/);
    assert.match(renderMarkdown('see http://example.com/x'), /<a href="http:\/\/example\.com\/x"/);
  });

  test('a quote in a link cannot break out of its attribute', () => {
    const html = renderMarkdown('[x](https://example.com/"onmouseover=alert(1))');
    assert.deepEqual(tags(html), [
      '<p>',
      '<a href="https://example.com/%22onmouseover=alert(1)" rel="nofollow noopener noreferrer">',
    ]);
  });

  test('images are never loaded: an http(s) image is a link, any other is text', () => {
    const remote = renderMarkdown('![a "chart"](https://evil.test/track.png)');
    assert.doesNotMatch(remote, /<img/);
    assert.match(
      remote,
      /<a href="https:\/\/evil\.test\/track\.png" rel="nofollow noopener noreferrer">\[image: a &quot;chart&quot;\]<\/a>/,
    );
    for (const input of [
      '![x](data:image/png;base64,AAAA)',
      '![x](javascript:alert(1))',
      '![<img src=x onerror=alert(1)>](https://evil.test/p.png)',
    ]) {
      const html = renderMarkdown(input);
      assert.doesNotMatch(html, /<img/, html);
    }
  });

  test('file names are not turned into links', () => {
    assert.doesNotMatch(renderMarkdown('Changed README.md and docs/guide.md'), /<a /);
  });
});
