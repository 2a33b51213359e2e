const base = new URL('https://api.example.com/v1/');
const url = new URL('search', base);
url.searchParams.set('q', 'code mode & sandboxes');
url.searchParams.set('limit', '10');
const parsed = new URL('https://example.com/a/b?x=1&x=2#frag');
return { url: url.toString(), xs: parsed.searchParams.getAll('x'), path: parsed.pathname };
