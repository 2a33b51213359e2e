const { details: users } = await tools.list_users({});
const active = users.filter(u => u.active);
const byTeam = active.reduce((acc, u) => {
  (acc[u.team] ??= []).push(u.name);
  return acc;
}, {});
return Object.fromEntries(Object.entries(byTeam).sort(([a], [b]) => a.localeCompare(b)));
