# Sourced by the client scripts: where each server they start keeps its registry.
#   registry_db WORKDIR NAME
# prints an SQLite file in WORKDIR, or, with FCM_REGISTRY_CLIENT_DB=postgres, a URL to a schema of
# its own (clients_<FCM_REGISTRY_CLIENT_RUN>_NAME) in the database FCM_REGISTRY_TEST_POSTGRES names;
# run-on-postgres.sh, which sets both, drops the schemas at its end. Needs psql for PostgreSQL.
registry_db() {
  if [ "${FCM_REGISTRY_CLIENT_DB:-sqlite}" != postgres ]; then
    echo "$1/$2.sqlite"
    return
  fi
  local schema="clients_${FCM_REGISTRY_CLIENT_RUN:?}_$2"
  psql "${FCM_REGISTRY_TEST_POSTGRES%%\?*}" -qc "CREATE SCHEMA IF NOT EXISTS $schema" > /dev/null
  case "$FCM_REGISTRY_TEST_POSTGRES" in
  *\?*) echo "$FCM_REGISTRY_TEST_POSTGRES&search_path=$schema" ;;
  *) echo "$FCM_REGISTRY_TEST_POSTGRES?search_path=$schema" ;;
  esac
}
