curl -s http://127.0.0.1:8080/v1/models
for model in qwen coder; do
  curl -N http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model": "'$model'", "messages": [{"role": "user", "content": "Hello"}],
         "stream": true, "max_tokens": 32}'
done
