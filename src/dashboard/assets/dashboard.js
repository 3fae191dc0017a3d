// The dashboard's only script, served from the package (the CSP allows no inline script):
// copy buttons. Pages work without it; the text to copy stays selectable.
document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('[data-copy]') : null;
  if (!button) return;
  const source = document.getElementById(button.getAttribute('data-copy') || '');
  if (!source) return;
  const text = source.textContent || '';
  const done = (label) => {
    button.textContent = label;
    setTimeout(() => {
      button.textContent = 'Copy';
    }, 2000);
  };
  if (navigator.clipboard) {
    navigator.clipboard.writeText(text).then(
      () => done('Copied'),
      () => select(source, done),
    );
  } else select(source, done);
});

function select(node, done) {
  const range = document.createRange();
  range.selectNodeContents(node);
  const selection = window.getSelection();
  selection.removeAllRanges();
  selection.addRange(range);
  done('Selected: press Ctrl+C');
}
