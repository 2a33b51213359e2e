console.log('Fetching users...');
const { details: users } = await tools.list_users({});
console.log(`Found ${users.length} users`);
console.table(users.slice(0, 2).map(({ name, team }) => ({ name, team })));
for (const u of users.filter(u => !u.active)) console.warn('inactive:', u.name);
return users.length;
