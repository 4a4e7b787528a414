# cmake -DIN=<etcd .proto> -DOUT=<stripped copy> -P strip_etcd_proto.cmake
#
# etcd's protos (Debian's golang-etcd-server-dev) carry options for Go code generators: gogoproto's
# and grpc-gateway's (google.api.http). Neither changes the wire format, and their .proto files
# are not installed with protoc, so the copy the build generates from drops them: the imports, the
# file options and the `option (google.api.http) = {...};` blocks of the services.
file(READ "${IN}" text)
string(REGEX REPLACE "import \"gogoproto/[^\"]*\";" "" text "${text}")
string(REGEX REPLACE "import \"google/api/[^\"]*\";" "" text "${text}")
string(REGEX REPLACE "option \\(gogoproto\\.[a-z_]+\\) = [a-z]+;" "" text "${text}")
# One level of nested braces: additional_bindings { ... }.
string(REGEX REPLACE "option \\(google\\.api\\.http\\) = {([^{}]|{[^{}]*})*};" "" text "${text}")
string(REGEX REPLACE "\\[\\(gogoproto\\.[^]]*\\]" "" text "${text}")
if(text MATCHES "gogoproto|google\\.api")
  message(FATAL_ERROR "${IN}: an option the build does not know how to drop is left")
endif()
file(WRITE "${OUT}" "${text}")
