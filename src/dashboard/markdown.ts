// Renders the agent's summaries (Markdown written by a model that read untrusted code) to
// HTML that is safe to put in a page: no raw HTML passes, links go only to http(s) and
// mailto addresses, and images are never loaded (they become links), so a summary can
// neither run script nor make the reader's browser call anywhere by itself.
// markdown-it with `html: false` escapes every tag the input holds; its link check is
// replaced by an allow-list, so anything else (`javascript:`, `data:`, relative paths)
// is left as the text it was written as.
import MarkdownIt from 'markdown-it';

const ALLOWED_LINK = /^(?:https?:\/\/|mailto:)/i;

const md = new MarkdownIt({ html: false, linkify: true, typographer: false });
// Fuzzy links would turn file names like README.md (.md is a country domain) into links.
md.linkify.set({ fuzzyLink: false, fuzzyEmail: false, fuzzyIP: false });
// markdown-it hands this the normalized (entity-decoded, percent-encoded) URL.
md.validateLink = (url: string): boolean => ALLOWED_LINK.test(url);

md.renderer.rules.link_open = (tokens, idx, options, _env, self) => {
  const token = tokens[idx];
  if (token) {
    token.attrSet('rel', 'nofollow noopener noreferrer');
  }
  return self.renderToken(tokens, idx, options);
};

// An image becomes a link to it, labelled with its alt text: nothing loads until clicked.
md.renderer.rules.image = (tokens, idx, options, env, self) => {
  const token = tokens[idx];
  if (!token) return '';
  const src = String(token.attrGet('src') ?? '');
  const alt = self.renderInlineAsText(token.children ?? [], options, env);
  const label = md.utils.escapeHtml(`image: ${alt || src}`);
  return `<a href="${md.utils.escapeHtml(src)}" rel="nofollow noopener noreferrer">[${label}]</a>`;
};

/** The HTML of a Markdown text, safe to place inside a page's body. */
export function renderMarkdown(text: string): string {
  return md.render(text);
}
